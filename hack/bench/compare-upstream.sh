#!/usr/bin/env bash
# Benchmark: hypercloud's cloud-controller-manager side by side with the upstream Go one
# (k8s.io/cloud-provider's app package at the Kubernetes version of hack/versions.env, with a
# fake provider answering as hypercloud's fake does: hack/tools/upstream-ccm), on one envtest
# kube-apiserver, same flags, leader election off, node controllers only (plus the service
# controller with --services). Runs alternate hc, go, go, hc (--rounds=R repeats that) so drift
# of the machine hits both alike; --order=hc,go makes one run of each where runs are long (5000
# Nodes and Services); each run is cmd/hypercloud/examples/bench_ccm_nodes.rs.
#
#   hack/bench/compare-upstream.sh [N] [--services=M] [--rounds=R] [--order=hc,go,go,hc] [extra CCM flags...]
#   hack/bench/compare-upstream.sh 1000                                        # QPS-bound defaults
#   hack/bench/compare-upstream.sh 1000 --kube-api-qps=1000 --kube-api-burst=2000 --concurrent-node-syncs=4
#   hack/bench/compare-upstream.sh 100 --services=100                          # + LoadBalancer Services
#
# Prints one table: per CCM the mean of its runs (time to all initialised, apiserver writes per
# Node, Events per Node, CCM peak RSS and CPU seconds, apiserver and etcd CPU seconds while it
# initialised, load average; with --services the time to ingress on all, CCM writes per
# Service, RSS while holding them, CPU while creating and deleting them), then hypercloud/upstream
# ratios (below 1: hypercloud spends less). A measurement, never a pass/fail on speed.
#
# HYPERCLOUD_BENCH_PROFILE=dev builds hypercloud without optimisations (faster to build, slower
# to run: its ratios then say little); HYPERCLOUD_BIN uses that binary and the bench example
# beside it instead of building (hack/test.sh's smoke). The Go build is cached in
# $HYPERCLOUD_CACHE/upstream-ccm.
set -euo pipefail
cd "$(dirname "$0")/../.."
TAG=compare-upstream
CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export HYPERCLOUD_CACHE="$CACHE"
# shellcheck source=hack/lib/go-build.sh
source hack/lib/go-build.sh
# shellcheck source=hack/versions.env
source hack/versions.env

n=1000
rounds=1
order="hc,go,go,hc"
services=0
extra=()
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then n="$1"; shift; fi
for a in "$@"; do
	case "$a" in
	--rounds=*)
		rounds="${a#--rounds=}"
		[[ "$rounds" =~ ^[1-9][0-9]?$ ]] || fail "--rounds=$rounds: want 1 to 99"
		;;
	--order=*)
		order="${a#--order=}"
		[[ "$order" =~ ^(hc|go)(,(hc|go))*$ ]] || fail "--order=$order: want a comma list of hc and go"
		;;
	--services=*)
		services="${a#--services=}"
		[[ "$services" =~ ^[0-9]+$ ]] || fail "--services=$services: want a count"
		;;
	--controllers=* | --cloud-provider=* | --cloud-config=* | --kubeconfig=* | --leader-elect=*)
		fail "$a: set by this script (both CCMs get the same)"
		;;
	*) extra+=("$a") ;;
	esac
done
[[ "$n" -ge 1 && "$n" -le 20000 ]] || fail "N=$n: want 1 to 20000"
controllers="cloud-node,cloud-node-lifecycle"
[[ "$services" -gt 0 ]] && controllers+=",service"

step "build the upstream CCM (hack/tools/upstream-ccm, k8s.io/cloud-provider v0.${KUBERNETES_VERSION#v1.})"
go_env
version="v0.${KUBERNETES_VERSION#v1.}"
grep -q "k8s.io/cloud-provider $version\$" hack/tools/upstream-ccm/go.mod ||
	fail "hack/tools/upstream-ccm/go.mod does not require k8s.io/cloud-provider $version: edit it and run 'go mod tidy' there"
src_hash="$(cat hack/tools/upstream-ccm/{main.go,go.mod,go.sum} | sha256sum | cut -c1-12)"
go_ccm="$CACHE/upstream-ccm/$version-$src_hash/upstream-ccm"
if [[ ! -x "$go_ccm" ]]; then
	mkdir -p "$(dirname "$go_ccm")"
	(cd hack/tools/upstream-ccm && go build -trimpath -ldflags "$(kube_ldflags)" -o "$go_ccm.tmp" .) || fail "go build hack/tools/upstream-ccm"
	mv "$go_ccm.tmp" "$go_ccm"
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
if [[ -n "${HYPERCLOUD_BIN:-}" ]]; then
	# A binary and bench example already built beside it (hack/test.sh: `cargo test --workspace
	# --features hypercloud/bench` builds the example too; `cargo build -p hypercloud` would
	# resolve features differently and compile the AWS SDK again).
	hc_bin="$HYPERCLOUD_BIN"
	bench="$(dirname "$hc_bin")/examples/bench_ccm_nodes"
	[[ -x "$bench" ]] || fail "HYPERCLOUD_BIN=$hc_bin but no $bench beside it"
else
	profile="${HYPERCLOUD_BENCH_PROFILE:-release}"
	step "build hypercloud and the bench ($profile)"
	cargo build --profile "$profile" -p hypercloud --features bench --bin hypercloud --example bench_ccm_nodes >&2
	out="$CARGO_TARGET_DIR/$([ "$profile" = dev ] && echo debug || echo "$profile")"
	hc_bin="$out/hypercloud"
	bench="$out/examples/bench_ccm_nodes"
fi

step "start envtest"
hack/envtest.sh build >&2
if [[ "$services" -gt 200 ]]; then
	# Room for M LoadBalancer Services: a Service IP and a node port each.
	export HYPERCLOUD_ENVTEST_SERVICE_CIDR=10.0.0.0/16
	export HYPERCLOUD_ENVTEST_NODE_PORT_RANGE="30000-$((30000 + services + 1000))"
	[[ "$services" -le 30000 ]] || fail "--services=$services: at most 30000 (node ports)"
fi
export HYPERCLOUD_ENVTEST_DIR="$CACHE/envtest/runs/compare-upstream-$$"
trap 'hack/envtest.sh stop >&2 || true; rm -rf "$HYPERCLOUD_ENVTEST_DIR"' EXIT
eval "$(HYPERCLOUD_ENVTEST_OWNER_PID=$$ hack/envtest.sh start)"

results="$(mktemp)"
run() {
	local who="$1" args=("$n" "--controllers=$controllers")
	[[ "$services" -gt 0 ]] && args+=("--services=$services")
	[[ "$who" = go ]] && args+=("--ccm-bin=$go_ccm")
	step "run $who ($n Nodes${services:+, $services Services})"
	# Each line to stderr as it comes, the RESULT line also to the results (not `tee
	# /dev/stderr`: reopening stderr truncates it when stdout and stderr are one file).
	"$bench" "$hc_bin" "${args[@]}" "${extra[@]}" | while IFS= read -r line; do
		printf '%s\n' "$line" >&2
		[[ "$line" != RESULT* ]] || printf '%s\n' "$line" >>"$results"
	done || fail "the $who run failed"
}
for _ in $(seq "$rounds"); do
	for who in ${order//,/ }; do
		run "$who"
	done
done

step "report"
python3 - "$results" "$n" "$services" "${extra[*]:-(defaults)}" <<'EOF'
import sys, statistics
path, n, services, flags = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
runs = {}
for line in open(path):
    kv = dict(f.split("=", 1) for f in line.split()[1:])
    runs.setdefault(kv.pop("ccm"), []).append(kv)
rows = [
    ("init_s", "time to all initialised (s)"),
    ("node_writes_per_node", "apiserver writes per Node"),
    ("events_per_node", "Events per Node"),
    ("ccm_peak_rss_mib", "CCM peak RSS (MiB)"),
    ("ccm_cpu_init_s", "CCM CPU while initialising (s)"),
    ("apiserver_cpu_init_s", "kube-apiserver CPU while initialising (s)"),
    ("etcd_cpu_init_s", "etcd CPU while initialising (s)"),
    ("load1", "load average (1 min) at the end"),
]
if services:
    rows += [
        ("svc_s", f"time until {services} Services have ingress (s)"),
        ("svc_writes_per_service", "CCM writes per Service"),
        ("ccm_rss_holding_mib", "CCM RSS holding them (MiB)"),
        ("ccm_cpu_svc_s", "CCM CPU creating + deleting them (s)"),
        ("apiserver_cpu_svc_s", "kube-apiserver CPU for them (s)"),
        ("etcd_cpu_svc_s", "etcd CPU for them (s)"),
    ]
def mean(who, key):
    vals = [float(r[key]) for r in runs.get(who, []) if key in r]
    return statistics.mean(vals) if vals else float("nan")
print(f"\ncompare-upstream: N={n} Nodes, flags: {flags}; runs: "
      f"hypercloud {len(runs.get('hypercloud', []))}, upstream {len(runs.get('upstream', []))} (means)")
print(f"| {'measure':<44} | {'hypercloud':>10} | {'upstream':>10} | {'ratio':>6} |")
print(f"|{'-'*46}|{'-'*12}|{'-'*12}|{'-'*8}|")
for key, label in rows:
    hc, go = mean("hypercloud", key), mean("upstream", key)
    ratio = f"{hc / go:.2f}x" if go and go == go and hc == hc and go != 0 else "-"
    if key == "load1":
        ratio = ""
    print(f"| {label:<44} | {hc:>10.3f} | {go:>10.3f} | {ratio:>6} |")
EOF
rm -f "$results"
