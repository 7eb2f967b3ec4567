#!/usr/bin/env bash
# Supply-chain checks with cargo-deny (deny.toml): licences, banned crates, sources.
#
#   hack/deny.sh          build cargo-deny when missing, then `cargo deny check licenses bans sources`
#   hack/deny.sh bin      build cargo-deny when missing; print its path
#
# cargo-deny is pinned in hack/versions.env (CARGO_DENY_VERSION) and built from crates.io with
# `cargo install --locked` into $HYPERCLOUD_CACHE/cargo-deny/<version> (about 4 minutes on 2
# cores the first time; cached afterwards). Advisories are not checked: the RustSec database
# is a git repository this machine cannot fetch (deny.toml says so).
set -Eeuo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TAG=deny
CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
# shellcheck source=hack/lib/go-build.sh
source "$ROOT/hack/lib/go-build.sh"
# shellcheck source=hack/versions.env
source "$ROOT/hack/versions.env"

root="$CACHE/cargo-deny/$CARGO_DENY_VERSION"
bin="$root/bin/cargo-deny"

build() {
	[[ -x "$bin" ]] && return
	step "build cargo-deny $CARGO_DENY_VERSION (cargo install --locked into $root)"
	heartbeat cargo-deny 4
	# Its own target dir: the workspace's is for the workspace's dependency versions.
	CARGO_TARGET_DIR="$CACHE/cargo-deny/target" cargo install --locked --quiet \
		--version "=$CARGO_DENY_VERSION" --root "$root.tmp" cargo-deny ||
		fail "cargo install cargo-deny $CARGO_DENY_VERSION"
	heartbeat_stop
	rm -rf "$root" && mv "$root.tmp" "$root"
	rm -rf "$CACHE/cargo-deny/target"
}

case "${1:-check}" in
bin)
	build
	echo "$bin"
	;;
check)
	build
	step "cargo deny check licenses bans sources (deny.toml)"
	(cd "$ROOT" && "$bin" --locked check licenses bans sources) ||
		fail "cargo deny found a problem (above)"
	;;
*) fail "usage: hack/deny.sh [check|bin]" ;;
esac
