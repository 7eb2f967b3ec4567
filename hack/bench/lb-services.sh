#!/usr/bin/env bash
# Benchmark: the cloud-controller-manager's service controller against the local cloud.
# A real `hypercloud local-cloud serve` holds K servers (Nova), K Nodes of those names are
# initialised by the CCM (--cloud-provider=local, on the envtest kube-apiserver); then N
# LoadBalancer Services are created and timed until every one has an ingress IP, deleted and
# timed until every one is gone (the CCM's finalizer removed) and the cloud holds none of their
# load balancers. For each phase it reports the provider calls per Service (the CCM's
# cloudprovider_api_request_duration_seconds_count, by request) and the cloud API requests per
# Service (the local cloud's localcloud_api_requests_total, by service, method, route and code).
# The work is cmd/hypercloud/examples/bench_ccm_nodes.rs (--provider=local --services=N).
#
#   hack/bench/lb-services.sh [N] [--nodes=K] [extra cloud-controller-manager flags...]
#   hack/bench/lb-services.sh 200 --concurrent-service-syncs=10     # docs/openstack-provider.md "Scale"
#   hack/bench/lb-services.sh 5 --nodes=2                            # hack/test.sh's smoke
#
# A measurement, never a pass/fail on speed. Ends with the load average (the machine may be
# shared: read the figures with it). HYPERCLOUD_BIN=PATH measures that binary (use a release
# build for figures) and runs the bench driver beside it (PATH's directory/examples/
# bench_ccm_nodes) unless HYPERCLOUD_BENCH_DRIVER names one; without HYPERCLOUD_BIN both are
# built (HYPERCLOUD_BENCH_PROFILE, default release). Uses the control plane in
# HYPERCLOUD_TEST_KUBECONFIG if set, else starts (and stops) its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
TAG=lb-services
fail() {
	echo "$TAG: $*" >&2
	exit 1
}

export HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HYPERCLOUD_CACHE/target}"

n=200
nodes=3
extra=()
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then n="$1"; shift; fi
for a in "$@"; do
	case "$a" in
	--nodes=*)
		nodes="${a#--nodes=}"
		[[ "$nodes" =~ ^[1-9][0-9]{0,2}$ ]] || fail "--nodes=$nodes: want 1 to 999"
		;;
	--controllers=* | --cloud-provider=* | --cloud-config=* | --kubeconfig=* | --leader-elect=*)
		fail "$a: set by this script"
		;;
	*) extra+=("$a") ;;
	esac
done
[[ "$n" -ge 1 && "$n" -le 30000 ]] || fail "N=$n: want 1 to 30000"

if [[ -n "${HYPERCLOUD_BIN:-}" ]]; then
	hc_bin="$HYPERCLOUD_BIN"
	bench="${HYPERCLOUD_BENCH_DRIVER:-$(dirname "$hc_bin")/examples/bench_ccm_nodes}"
else
	profile="${HYPERCLOUD_BENCH_PROFILE:-release}"
	echo "$TAG: build hypercloud and the bench driver ($profile)" >&2
	cargo build --profile "$profile" -p hypercloud --features bench --bin hypercloud --example bench_ccm_nodes >&2
	out="$CARGO_TARGET_DIR/$([ "$profile" = dev ] && echo debug || echo "$profile")"
	hc_bin="$out/hypercloud"
	bench="${HYPERCLOUD_BENCH_DRIVER:-$out/examples/bench_ccm_nodes}"
fi
[[ -x "$hc_bin" ]] || fail "no hypercloud binary at $hc_bin"
[[ -x "$bench" ]] || fail "no bench driver at $bench (HYPERCLOUD_BENCH_DRIVER)"

if [[ -z "${HYPERCLOUD_TEST_KUBECONFIG:-}" ]]; then
	hack/envtest.sh build >&2
	if [[ "$n" -gt 200 ]]; then
		# Room for N LoadBalancer Services: a Service IP and a node port each.
		export HYPERCLOUD_ENVTEST_SERVICE_CIDR=10.0.0.0/16
		export HYPERCLOUD_ENVTEST_NODE_PORT_RANGE="30000-$((30000 + n + 1000))"
	fi
	export HYPERCLOUD_ENVTEST_DIR="$HYPERCLOUD_CACHE/envtest/runs/lb-services-$$"
	trap 'hack/envtest.sh stop >&2 || true; rm -rf "$HYPERCLOUD_ENVTEST_DIR"' EXIT
	eval "$(HYPERCLOUD_ENVTEST_OWNER_PID=$$ hack/envtest.sh start)"
fi

echo "$TAG: $n LoadBalancer Services, $nodes Nodes, $(nproc) CPUs, load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$bench" "$hc_bin" "$nodes" --provider=local "--services=$n" \
	--controllers=cloud-node,cloud-node-lifecycle,service "${extra[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
