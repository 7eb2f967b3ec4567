#!/usr/bin/env bash
# Benchmark: the cloud-controller-manager initialising N Nodes (default 1000) that carry the
# uninitialized taint, on the envtest apiserver, against the fake provider (default) or, with
# --provider=local, a real `hypercloud local-cloud serve` holding N servers created through the
# Nova API, or with --provider=aws, moto holding N instances behind a proxy that counts the EC2
# requests (and Amazon's metadata mock; hack/aws-tools.sh installs both).
# Reports time to all initialised, apiserver writes per Node, provider calls per Node,
# the CCM's peak RSS and, with the local cloud, the HTTP requests it answered per Node and its
# peak RSS (cmd/hypercloud/examples/bench_ccm_nodes.rs does the work).
#
# With --kwok the Nodes live in a real cluster (kwok plays their kubelets with the kubelet's 40 s
# Lease, the upstream kube-controller-manager runs; hack/cluster.sh builds both) and, once they
# are initialised, it reports the CCM's steady state over a fixed window (--window=SECONDS,
# default 300): CPU, RSS, the apiserver requests the CCM made and the cloud requests, per
# Node-hour.
#
#   hack/bench/ccm-nodes.sh [N] [--provider=fake|local|aws] [--kwok [--window=S]] [extra cloud-controller-manager flags...]
#   hack/bench/ccm-nodes.sh 1000 --kube-api-qps=200 --kube-api-burst=300 --concurrent-node-syncs=8
#   hack/bench/ccm-nodes.sh 1000 --provider=local
#   hack/bench/ccm-nodes.sh 1000 --provider=local --kwok --kube-api-qps=200 --kube-api-burst=300
#   hack/bench/ccm-nodes.sh 500 --provider=aws --kwok
#
# Uses the control plane in HYPERCLOUD_TEST_KUBECONFIG if set, else starts (and stops) its own.
# HYPERCLOUD_BENCH_PROFILE=dev builds without optimisations (faster to build, slower to run).
set -euo pipefail
cd "$(dirname "$0")/../.."

export HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HYPERCLOUD_CACHE/target}"
profile="${HYPERCLOUD_BENCH_PROFILE:-release}"
n="${1:-1000}"
shift || true

cargo build --profile "$profile" -p hypercloud --features bench --bin hypercloud --example bench_ccm_nodes >&2
out="$CARGO_TARGET_DIR/$([ "$profile" = dev ] && echo debug || echo "$profile")"

if [ -z "${HYPERCLOUD_TEST_KUBECONFIG:-}" ]; then
	hack/envtest.sh build >&2
	export HYPERCLOUD_ENVTEST_DIR="$HYPERCLOUD_CACHE/envtest/runs/bench-$$"
	trap 'hack/envtest.sh stop >&2 || true; rm -rf "$HYPERCLOUD_ENVTEST_DIR"' EXIT
	eval "$(HYPERCLOUD_ENVTEST_OWNER_PID=$$ hack/envtest.sh start)"
fi

"$out/examples/bench_ccm_nodes" "$out/hypercloud" "$n" "$@"
