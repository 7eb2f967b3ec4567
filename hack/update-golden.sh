#!/usr/bin/env bash
# Regenerates the golden --help files checked by cmd/hypercloud/tests/it/help_golden.rs.
# (The check itself runs in hack/test.sh as an ordinary test.)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hypercloud/target}"
HYPERCLOUD_UPDATE_GOLDEN=1 cargo test -p hypercloud --test it help_golden::
git --no-pager diff --stat -- cmd/hypercloud/tests/golden
