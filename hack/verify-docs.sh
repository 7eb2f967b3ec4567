#!/usr/bin/env bash
# Fails when a list in the docs or the README differs from what the code defines
# (personalities, workspace crates, the openstack provider's documented cloud.conf keys, the
# code map's hack/ scripts, the flags of docs/guide/personalities.md), when a doc names a
# repository path that does not exist, or when the code map (docs/architecture.md) names a
# function, module or constant that does not (hack/lib/verify_docs.py says which; fast, no
# build). The controller tables are checked by pkg/controllers' unit test
# `docs_list_every_controller` (names.rs), which `cargo test` runs; each cloud's load balancer
# settings table by its provider's unit test `lb_settings_doc` (loadbalancer.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 hack/lib/verify_docs.py; then
  echo "verify-docs: the docs differ from the code (above); fix the docs (or the list in hack/lib/verify_docs.py)." >&2
  exit 1
fi
echo "verify-docs: the docs' lists match the code and every path they name exists"
