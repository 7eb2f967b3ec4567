#!/usr/bin/env bash
# Makes one symlink per hypercloud personality in DIR, pointing at the hypercloud binary,
# so each component can be started under its own name (hyperkube style).
#   hack/install-symlinks.sh DIR
# The binary is $HYPERCLOUD_BIN, else `hypercloud` on PATH, else the cargo build output.
set -euo pipefail
dir="${1:-}"
if [ -z "$dir" ] || [ "$#" -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
bin="${HYPERCLOUD_BIN:-}"
if [ -z "$bin" ]; then
  bin="$(command -v hypercloud || true)"
fi
if [ -z "$bin" ]; then
  bin="${CARGO_TARGET_DIR:-$HOME/.cache/hypercloud/target}/debug/hypercloud"
fi
if [ ! -x "$bin" ]; then
  echo "install-symlinks: hypercloud binary not found at $bin (build it, or set HYPERCLOUD_BIN)" >&2
  exit 1
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
mkdir -p "$dir"
# Names come from the binary itself, so this list never drifts from the code.
"$bin" --list | while read -r name rest; do
  ln -sfn "$bin" "$dir/$name"
  echo "$dir/$name -> $bin"
  case "$rest" in
    "(alias: "*) for alias in $(echo "$rest" | sed -e 's/^(alias: //' -e 's/)$//' -e 's/,/ /g'); do
        ln -sfn "$bin" "$dir/$alias"
        echo "$dir/$alias -> $bin"
      done ;;
  esac
done
