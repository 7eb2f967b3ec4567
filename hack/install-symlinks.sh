#!/usr/bin/env bash
# Makes one symlink per hypercloud personality in DIR, pointing at the hypercloud binary,
# so each component can be started under its own name (hyperkube style).
#   hack/install-symlinks.sh [--link-to TARGET] DIR
# The binary is $HYPERCLOUD_BIN, else `hypercloud` on PATH, else the cargo build output.
# The links point at its absolute path, or at TARGET as given (hack/image.sh and the
# Dockerfile use `--link-to hypercloud`: relative links next to the binary in the image).
set -euo pipefail
target=""
if [ "${1:-}" = "--link-to" ] && [ "$#" -ge 2 ]; then
  target="$2"
  shift 2
fi
dir="${1:-}"
if [ -z "$dir" ] || [ "$#" -ne 1 ] || [ "${dir#-}" != "$dir" ]; then
  echo "usage: $0 [--link-to TARGET] DIR" >&2
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
target="${target:-$bin}"
mkdir -p "$dir"
# Names come from the binary itself, so this list never drifts from the code.
"$bin" --list | while read -r name rest; do
  ln -sfn "$target" "$dir/$name"
  echo "$dir/$name -> $target"
  case "$rest" in
    "(alias: "*) for alias in $(echo "$rest" | sed -e 's/^(alias: //' -e 's/)$//' -e 's/,/ /g'); do
        ln -sfn "$target" "$dir/$alias"
        echo "$dir/$alias -> $target"
      done ;;
  esac
done
