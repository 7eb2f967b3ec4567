#!/usr/bin/env bash
# Benchmark: vCenter requests (SOAP and vAPI, logins included) per Node initialised and per
# Node-hour at steady state, for N VMs (default 200) in vcsim, with the vsphere provider's
# listings and with per-node SearchIndex look-ups (cache-ttl = 0, as upstream). The work is in
# pkg/providers/vsphere/examples/bench_requests.rs; vcsim and govc come from hack/vcsim.sh.
#
#   hack/bench/vsphere-requests.sh [N]
set -euo pipefail
cd "$(dirname "$0")/../.."
export HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HYPERCLOUD_CACHE/target}"
hack/vcsim.sh build
cargo run --quiet -p hypercloud-providers-vsphere --features bench --example bench_requests -- "${1:-200}"
