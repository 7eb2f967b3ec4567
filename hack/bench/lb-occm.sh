#!/usr/bin/env bash
# Benchmark: hypercloud's OpenStack provider side by side with upstream's OpenStack CCM (OCCM,
# k8s.io/cloud-provider-openstack at $OCCM_VERSION of hack/versions.env, unpatched, built by
# hack/occm.sh) on the same local cloud: per run a fresh `hypercloud local-cloud serve` with K
# servers, K tainted Nodes that the CCM's own node controller initialises, then N LoadBalancer
# Services (one TCP port each) created and timed until all have an ingress IP, deleted and
# timed until all are gone and the cloud holds none of their load balancers. One envtest
# kube-apiserver for all runs; both CCMs get the same flags and the same cloud.conf (the local
# cloud's credentials, `[LoadBalancer] subnet-id` and `floating-network-id`). Runs alternate
# hc, occm, occm, hc (--rounds=R repeats that, --order= chooses) so drift of the machine hits
# both alike; each run is cmd/hypercloud/examples/bench_ccm_nodes.rs (--provider=local
# --services=N, with --ccm-bin=OCCM for upstream's).
#
#   hack/bench/lb-occm.sh [N] [--nodes=K] [--rounds=R] [--order=hc,occm,occm,hc] [extra CCM flags...]
#   hack/bench/lb-occm.sh 200 --concurrent-service-syncs=10                                    # QPS-bound
#   hack/bench/lb-occm.sh 200 --concurrent-service-syncs=10 --kube-api-qps=300 --kube-api-burst=600
#   hack/bench/lb-occm.sh 3 --nodes=1 --order=hc,occm                                          # a smoke
#   hack/bench/lb-occm.sh 200 --cloud-latency=30ms --concurrent-service-syncs=10 ...           # a cloud API's latency
#
# --cloud-latency=SPEC starts each local cloud with `--inject-latency SPEC`: every answer waits
# that long, as a real cloud API's answer takes tens of milliseconds where the local cloud's
# takes one or two (without it, both CCMs' deletions are bound by the apiserver).
#
# Prints one table: per CCM the mean of its runs (time to ingress on all, time to all deleted,
# cloud requests per Service created and deleted, the local cloud's
# `localcloud_api_requests_total` broken down by route), then the hypercloud/OCCM ratio (below
# 1: hypercloud spends less), the date and the load average. A measurement, never a pass/fail
# on speed.
#
# HYPERCLOUD_BENCH_PROFILE (default release) chooses hypercloud's build; HYPERCLOUD_BIN
# measures that binary instead, with the bench driver beside it (or HYPERCLOUD_BENCH_DRIVER).
# HYPERCLOUD_OCCM names an OCCM binary instead of hack/occm.sh's (cached in
# $HYPERCLOUD_CACHE/occm).
set -euo pipefail
cd "$(dirname "$0")/../.."
TAG=lb-occm
CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export HYPERCLOUD_CACHE="$CACHE"
# shellcheck source=hack/lib/go-build.sh
source hack/lib/go-build.sh
# shellcheck source=hack/versions.env
source hack/versions.env

n=200
nodes=3
rounds=1
order="hc,occm,occm,hc"
extra=()
latency=()
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then n="$1"; shift; fi
for a in "$@"; do
	case "$a" in
	--nodes=*)
		nodes="${a#--nodes=}"
		[[ "$nodes" =~ ^[1-9][0-9]{0,2}$ ]] || fail "--nodes=$nodes: want 1 to 999"
		;;
	--rounds=*)
		rounds="${a#--rounds=}"
		[[ "$rounds" =~ ^[1-9][0-9]?$ ]] || fail "--rounds=$rounds: want 1 to 99"
		;;
	--order=*)
		order="${a#--order=}"
		[[ "$order" =~ ^(hc|occm)(,(hc|occm))*$ ]] || fail "--order=$order: want a comma list of hc and occm"
		;;
	--cloud-latency=*)
		# The local cloud's --inject-latency (bench_ccm_nodes passes it), not a CCM flag.
		[[ "${a#--cloud-latency=}" =~ ^[a-z=0-9,.-]+$ ]] || fail "$a: want a latency such as 30ms or load-balancer=30ms,network=30ms"
		latency=("$a")
		;;
	--controllers=* | --cloud-provider=* | --cloud-config=* | --kubeconfig=* | --leader-elect=*)
		fail "$a: set by this script (both CCMs get the same)"
		;;
	*) extra+=("$a") ;;
	esac
done
[[ "$n" -ge 1 && "$n" -le 250 ]] || fail "N=$n: want 1 to 250 (the local cloud's public subnet holds ~250 floating IPs)"

step "build OCCM $OCCM_VERSION (hack/occm.sh, cached)"
occm="$(hack/occm.sh bin)"
[[ -x "$occm" ]] || fail "no OCCM binary at $occm"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
if [[ -n "${HYPERCLOUD_BIN:-}" ]]; then
	hc_bin="$HYPERCLOUD_BIN"
	bench="${HYPERCLOUD_BENCH_DRIVER:-$(dirname "$hc_bin")/examples/bench_ccm_nodes}"
else
	profile="${HYPERCLOUD_BENCH_PROFILE:-release}"
	step "build hypercloud and the bench driver ($profile)"
	cargo build --profile "$profile" -p hypercloud --features bench --bin hypercloud --example bench_ccm_nodes >&2
	out="$CARGO_TARGET_DIR/$([ "$profile" = dev ] && echo debug || echo "$profile")"
	hc_bin="$out/hypercloud"
	bench="${HYPERCLOUD_BENCH_DRIVER:-$out/examples/bench_ccm_nodes}"
fi
[[ -x "$hc_bin" ]] || fail "no hypercloud binary at $hc_bin"
[[ -x "$bench" ]] || fail "no bench driver at $bench (HYPERCLOUD_BENCH_DRIVER)"

if [[ -z "${HYPERCLOUD_TEST_KUBECONFIG:-}" ]]; then
	step "start envtest"
	hack/envtest.sh build >&2
	export HYPERCLOUD_ENVTEST_DIR="$CACHE/envtest/runs/lb-occm-$$"
	trap 'hack/envtest.sh stop >&2 || true; rm -rf "$HYPERCLOUD_ENVTEST_DIR"' EXIT
	eval "$(HYPERCLOUD_ENVTEST_OWNER_PID=$$ hack/envtest.sh start)"
fi

results="$(mktemp)"
trap 'rm -f "$results"; hack/envtest.sh stop >&2 || true; [[ -z "${HYPERCLOUD_ENVTEST_DIR:-}" ]] || rm -rf "$HYPERCLOUD_ENVTEST_DIR"' EXIT
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
run() {
	local who="$1" args=("$nodes" --provider=local "--services=$n" --controllers=cloud-node,cloud-node-lifecycle,service)
	[[ "$who" = occm ]] && args+=("--ccm-bin=$occm")
	step "run $who ($n Services, $nodes Nodes, load $(cut -d' ' -f1 /proc/loadavg))"
	# Each line to stderr as it comes, the RESULT and ROUTE lines also to the results.
	"$bench" "$hc_bin" "${args[@]}" "${latency[@]}" "${extra[@]}" | while IFS= read -r line; do
		printf '%s\n' "$line" >&2
		[[ "$line" != RESULT* && "$line" != ROUTE* ]] || printf '%s\n' "$line" >>"$results"
	done || fail "the $who run failed"
}
for _ in $(seq "$rounds"); do
	for who in ${order//,/ }; do
		run "$who"
	done
done

step "report"
flags="${latency[*]} ${extra[*]}"
flags="${flags# }"
python3 - "$results" "$n" "$nodes" "${flags:-(defaults)}" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" "$OCCM_VERSION" <<'PY'
import sys, statistics, datetime
path, n, nodes, flags, load0, load1, occm = sys.argv[1:8]
runs, routes = {}, {}
for line in open(path):
    if line.startswith("RESULT "):
        kv = dict(f.split("=", 1) for f in line.split()[1:])
        runs.setdefault(kv.pop("ccm"), []).append(kv)
    elif line.startswith("ROUTE "):
        _, ccm, phase, per, route = line.rstrip("\n").split(" ", 4)
        ccm, phase, per = ccm.split("=")[1], phase.split("=")[1], float(per.split("=")[1])
        # OCCM (gophercloud) says /v2.0/lbaas, hypercloud /v2/lbaas: one API, one row.
        route = route.replace("/v2.0/lbaas/", "/v2/lbaas/")
        runs_routes = routes.setdefault((phase, route), {})
        runs_routes[ccm] = runs_routes.get(ccm, []) + [per]
names = [c for c in ("hypercloud", "upstream") if c in runs]
count = {c: len(runs[c]) for c in names}
def mean(c, key):
    return statistics.mean(float(r[key]) for r in runs[c])
def route_mean(phase, route, c):
    # A run that sent none of a route has no line for it: its share is 0.
    return sum(routes[(phase, route)].get(c, [])) / count[c]
head = ["hypercloud" if c == "hypercloud" else f"OCCM {occm}" for c in names]
print(f"\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {n} LoadBalancer Services, {nodes} Nodes, flags: {flags}")
print(f"runs: " + ", ".join(f"{h} {count[c]}" for c, h in zip(names, head)) + f"; load average before {load0}, after {load1}\n")
ratio = len(names) == 2
print("| | " + " | ".join(head) + (" | hypercloud/OCCM |" if ratio else " |"))
print("|---|" + "---|" * (len(names) + ratio))
rows = [
    ("svc_s", "time to ingress on all (s)"),
    ("svc_delete_s", "time to all deleted (s)"),
    ("svc_cloud_create", "cloud requests per Service created"),
    ("svc_cloud_delete", "cloud requests per Service deleted"),
    ("load1", "load average (1 min) at the end"),
]
def line(label, vals):
    cells = [f"{v:.2f}" for v in vals]
    if ratio:
        cells.append(f"{vals[0] / vals[1]:.2f}" if vals[1] else "-")
    print(f"| {label} | " + " | ".join(cells) + " |")
for key, label in rows:
    line(label, [mean(c, key) for c in names])
for phase in ("create", "delete"):
    for (p, route) in sorted(k for k in routes if k[0] == phase):
        line(f"{phase}: `{route}`", [route_mean(phase, route, c) for c in names])
PY
