#!/usr/bin/env bash
# Runs the same scenario (hack/local-up.sh --smoke: Nodes, a LoadBalancer Service, a PV) in the
# in-tree and the external layout and diffs what the cloud put into the cluster: Nodes (labels,
# taints, addresses, providerID), Services (ingress, finalizers) and PVs (labels, affinity).
# An empty diff means moving from in-tree to external changes nothing a workload can see.
#
#   hack/compare-modes.sh [--cloud local|aws|vsphere|gce|azure|cloudstack|rackspace] [--nodes N] [--dir DIR] [--ui]
#
# --cloud vsphere runs local-up against vcsim (hack/lib/cloud-vsphere.sh): there is no load
# balancer on vSphere, so each run must instead say that the load balancer step was skipped.
# --cloud gce runs it against the local cloud's Compute Engine dialect (hack/lib/cloud-gce.sh):
# the load balancer is a forwarding rule to a target pool, curled through as with --cloud local.
# --cloud rackspace runs it against the local cloud's Keystone v2.0 with an API key
# (hack/lib/cloud-rackspace.sh): no load balancer (as upstream's provider), so both runs stop at
# "load balancer step skipped for rackspace"; the external run has no volume step.
# --cloud azure runs it against the local cloud's Azure Resource Manager dialect
# (hack/lib/cloud-azure.sh): the load balancer is a frontend of the Standard load balancer
# `kubernetes`, curled through.
# --cloud cloudstack runs it against the local cloud's Apache CloudStack dialect
# (hack/lib/cloud-cloudstack.sh): the load balancer is a public IP with a load-balancer rule to
# the Nodes' node ports and a firewall rule from loadBalancerSourceRanges, curled through.
# Differences upstream Kubernetes has too are listed, each with its reason, in
# hack/lib/expected-mode-differences.txt; any other difference fails (exit 1). Both runs must
# also reach "curl through the load balancer succeeded" (with --cloud aws through the ELB's DNS
# name, which the local cloud's ELB follower serves). State and logs: DIR/{in-tree,external}
# (default $HOME/.cache/hypercloud/compare-modes, or compare-modes-aws).
# --ui runs both with local-up's --ui (headless Chromium checks the live trace view of each run)
# and then checks the two runs side by side in `hypercloud trace serve --compare DIR`: both
# layouts shown, every difference explained by hack/lib/expected-mode-differences.txt.
# Browse a finished comparison yourself with
#   hypercloud trace serve --compare DIR --expected-differences hack/lib/expected-mode-differences.txt
set -euo pipefail
cd "$(dirname "$0")/.."

export HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
dir="" nodes=3 cloud=local ui=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cloud) cloud="${2:-}"; shift 2 ;;
    --cloud=*) cloud="${1#--cloud=}"; shift ;;
    --nodes) nodes="${2:-}"; shift 2 ;;
    --nodes=*) nodes="${1#--nodes=}"; shift ;;
    --dir) dir="${2:-}"; shift 2 ;;
    --dir=*) dir="${1#--dir=}"; shift ;;
    --ui) ui=(--ui); shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "compare-modes: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$dir" ] || dir="$HYPERCLOUD_CACHE/compare-modes$([ "$cloud" = local ] || echo "-$cloud")"
mkdir -p "$dir"
done_line='^local-up: curl through the load balancer succeeded$'
case "$cloud" in
  vsphere|rackspace) done_line="^local-up: load balancer step skipped for $cloud\$" ;;
esac

for mode in in-tree external; do
  printf '\n==> hack/local-up.sh --smoke --cloud %s --mode %s\n' "$cloud" "$mode"
  # local-up validates --nodes and names the problem.
  if ! hack/local-up.sh --smoke --cloud "$cloud" --mode "$mode" --nodes "$nodes" --dir "$dir/$mode" \
    --dump "$dir/$mode.view" "${ui[@]}" 2>&1 | tee "$dir/$mode.out"; then
    echo "compare-modes: FAILED: the $mode run failed (output in $dir/$mode.out)" >&2
    exit 1
  fi
  grep -q "$done_line" "$dir/$mode.out" ||
    { echo "compare-modes: FAILED: the $mode run did not reach '$done_line'" >&2; exit 1; }
done

printf '\n==> diff in-tree external (what the cloud put into the cluster)\n'
rc=0
diff -u --label in-tree --label external "$dir/in-tree.view" "$dir/external.view" >"$dir/modes.diff" || rc=$?
[ "$rc" -le 1 ] || { echo "compare-modes: FAILED: diff could not compare the views" >&2; exit 1; }

if [ ${#ui[@]} -gt 0 ]; then
  printf '\n==> the two runs side by side in the trace view (hypercloud trace serve --compare, headless Chromium)\n'
  eval "$(hack/ui-tools.sh env)"
  export HYPERCLOUD_CHROMIUM HYPERCLOUD_PLAYWRIGHT
  # The binary the runs used (their personality symlinks point at it).
  bin="${HYPERCLOUD_BIN:-$(readlink -f "$dir/external/bin/local-cloud")}"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$bin" trace serve --listen "127.0.0.1:$port" --compare "$dir" \
    --expected-differences hack/lib/expected-mode-differences.txt >"$dir/trace-serve-compare.log" 2>&1 &
  serve_pid=$!
  trap 'kill "$serve_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1 60); do curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.5; done
  mkdir -p "$HYPERCLOUD_CACHE/ui-artifacts"
  node hack/lib/ui-check.mjs --compare --url "http://127.0.0.1:$port/" \
    --screenshot "$HYPERCLOUD_CACHE/ui-artifacts/compare-modes-$cloud.png" ||
    { echo "compare-modes: FAILED: the side-by-side trace view (log $dir/trace-serve-compare.log)" >&2; exit 1; }
  kill "$serve_pid" 2>/dev/null || true
fi

if [ "$rc" -eq 0 ]; then
  echo "compare-modes: no difference: the migration is faithful"
  exit 0
fi
cat "$dir/modes.diff"
python3 hack/lib/check-mode-diff.py "$dir/modes.diff" hack/lib/expected-mode-differences.txt
