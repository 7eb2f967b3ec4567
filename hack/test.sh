#!/usr/bin/env bash
# The one command that runs every test of hypercloud (README: "Run all the tests").
# .ci/run calls exactly this. Build outputs are cached outside the clone so repeat runs are fast.
set -euo pipefail
cd "$(dirname "$0")/.."

export HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HYPERCLOUD_CACHE/target}"
mkdir -p "$HYPERCLOUD_CACHE"

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

# --- real servers the integration tests need (each script installs what it needs) ---
# (envtest: kube-apiserver + etcd; python tools: openstackclient) are added here by their issues.

# envtest: a real kube-apiserver + etcd (hack/envtest.sh; built once per version into the cache).
# A run dir of our own, so a control plane started by hand or by another hack/test.sh is left alone;
# stopped on exit by the trap, and by envtest's watchdog should this shell die without running it.
step "envtest: build kube-apiserver + etcd (cached under $HYPERCLOUD_CACHE/envtest/bin)"
hack/envtest.sh build
step "envtest: start kube-apiserver + etcd"
export HYPERCLOUD_ENVTEST_DIR="$HYPERCLOUD_CACHE/envtest/runs/test-sh-$$"
stop_envtest() {
	local rc=$?
	hack/envtest.sh stop || true
	if [ "$rc" -eq 0 ]; then rm -rf "$HYPERCLOUD_ENVTEST_DIR"; else echo "envtest logs: $HYPERCLOUD_ENVTEST_DIR" >&2; fi
}
trap stop_envtest EXIT
envtest_env="$(HYPERCLOUD_ENVTEST_OWNER_PID=$$ hack/envtest.sh start)"
eval "$envtest_env"

# python tools: the pinned official openstack CLI in $HYPERCLOUD_CACHE/venv (hack/python-tools.sh;
# a no-op when already installed), driven against the local cloud by cmd/hypercloud/tests/local_cloud_*.rs.
step "python tools: python-openstackclient (venv in $HYPERCLOUD_CACHE/venv)"
hack/python-tools.sh

step "cargo test (unit + integration)"
cargo test --workspace --locked --no-fail-fast

# The README's main command, non-interactive, in both layouts: compare-modes runs
# hack/local-up.sh --smoke in-tree and external, asserts each reaches "curl through the load
# balancer succeeded", and fails on any difference between the layouts upstream does not have.
step "hack/compare-modes.sh (hack/local-up.sh --smoke in both layouts, then diff)"
hack/compare-modes.sh --dir "$HYPERCLOUD_CACHE/compare-modes-ci"
# The committed sequence diagrams (docs/diagrams) must match what those two runs recorded.
step "hack/verify-diagrams.sh (the cloud calls of those runs, rendered, against docs/diagrams)"
hack/verify-diagrams.sh --from "$HYPERCLOUD_CACHE/compare-modes-ci"

step "all tests passed"
