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

step "cargo test (unit + integration)"
cargo test --workspace --locked

step "all tests passed"
