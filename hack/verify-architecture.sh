#!/usr/bin/env bash
# Fails when
# - the crate graph in docs/architecture.md differs from the workspace's Cargo.toml files
#   (fix with hack/update-architecture.sh);
# - modules import each other in a circle: at every level of a crate's module tree, the
#   children of one module are layered one way (hack/lib/module_graph.py circles explains the
#   rule and prints one citing line per edge);
# - a local-cloud file has more than 800 lines (each dialect adds one file per resource);
# - the local cloud's records (src/model) import from its HTTP layer (src/api).
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
tmp="$(mktemp -d "${TMPDIR:-/tmp}/hypercloud-verify-architecture.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
hack/update-architecture.sh --root "$tmp"
if ! diff -u docs/architecture.md "$tmp/docs/architecture.md"; then
  echo "verify-architecture: the crate graph in docs/architecture.md is stale (diff above: committed -> now)." >&2
  echo "verify-architecture: regenerate with hack/update-architecture.sh and commit it." >&2
  status=1
else
  echo "verify-architecture: docs/architecture.md's crate graph matches Cargo.toml"
fi

if ! python3 hack/lib/module_graph_test.py >"$tmp/selftest" 2>&1; then
  cat "$tmp/selftest" >&2
  echo "verify-architecture: hack/lib/module_graph.py fails its self-test (above)." >&2
  exit 1
fi
if ! python3 hack/lib/module_graph.py circles >"$tmp/circles" 2>&1; then
  cat "$tmp/circles" >&2
  echo "verify-architecture: import circles between modules (above); move what both sides need below them." >&2
  status=1
else
  echo "verify-architecture: no import circle between modules"
fi

if ! python3 hack/lib/module_graph.py long-files --max 800 pkg/localcloud >"$tmp/long" 2>&1; then
  cat "$tmp/long" >&2
  echo "verify-architecture: local-cloud files over 800 lines (above); split them by resource." >&2
  status=1
else
  echo "verify-architecture: no local-cloud file over 800 lines"
fi

if grep -rn 'use crate::api' pkg/localcloud/src/model pkg/localcloud/src/model.rs >"$tmp/upward" 2>/dev/null; then
  cat "$tmp/upward" >&2
  echo "verify-architecture: the local cloud's records import its HTTP layer (above)." >&2
  status=1
fi
# Test binaries are reused across checkouts that share a target directory (cargo's hashes do
# not depend on where a checkout is), so a path compiled in with env!("CARGO_MANIFEST_DIR")
# names the checkout that built them: tests find files with hypercloud_testenv::repo_root().
if grep -rn --include='*.rs' 'env!("CARGO_MANIFEST_DIR")' cmd pkg | grep -v '^pkg/testenv/src/lib.rs:' >"$tmp/baked"; then
  cat "$tmp/baked" >&2
  echo "verify-architecture: paths compiled in with env!(\"CARGO_MANIFEST_DIR\") (above); use hypercloud_testenv::repo_root()." >&2
  status=1
else
  echo "verify-architecture: no checkout path compiled into a test"
fi
exit "$status"
