#!/usr/bin/env bash
# Fails when the crate graph in docs/architecture.md differs from the workspace's Cargo.toml
# files. Fix with hack/update-architecture.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp="$(mktemp -d "${TMPDIR:-/tmp}/hypercloud-verify-architecture.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
hack/update-architecture.sh --root "$tmp"
if ! diff -u docs/architecture.md "$tmp/docs/architecture.md"; then
  echo "verify-architecture: the crate graph in docs/architecture.md is stale (diff above: committed -> now)." >&2
  echo "verify-architecture: regenerate with hack/update-architecture.sh and commit it." >&2
  exit 1
fi
echo "verify-architecture: docs/architecture.md's crate graph matches Cargo.toml"
