#!/usr/bin/env bash
# ui-tools: what the browser check of `hypercloud trace serve`'s page (hack/lib/ui-check.mjs,
# run by `hack/local-up.sh --ui --smoke`) needs, installed when missing:
#   chromium         Debian's package (/usr/bin/chromium), apt-get as root; playwright's own
#                    browser download does not work here
#   playwright-core  npm registry, PLAYWRIGHT_CORE_VERSION of hack/versions.env, into
#                    $HYPERCLOUD_CACHE/ui-tools/playwright-core-<version>
#
#   hack/ui-tools.sh install   install whatever is missing (idempotent; quick when installed)
#   hack/ui-tools.sh env       install, then print HYPERCLOUD_CHROMIUM and HYPERCLOUD_PLAYWRIGHT
#                              (what ui-check.mjs reads): eval "$(hack/ui-tools.sh env)"
#
# Environment:
#   HYPERCLOUD_CACHE   cache root (default $HOME/.cache/hypercloud)
# Progress goes to stderr; only `env`'s lines go to stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.env
source "$ROOT/hack/versions.env"
CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
CHROMIUM=/usr/bin/chromium
PREFIX="$CACHE/ui-tools/playwright-core-$PLAYWRIGHT_CORE_VERSION"

log() { printf 'ui-tools: %s\n' "$*" >&2; }
fail() { printf 'ui-tools: %s\n' "$*" >&2; exit 1; }

install_chromium() {
	if [[ ! -x "$CHROMIUM" ]]; then
		[[ "$(id -u)" == 0 ]] || fail "$CHROMIUM is missing and installing it needs root (apt-get install chromium)"
		log "installing Debian's chromium (apt-get)"
		DEBIAN_FRONTEND=noninteractive apt-get update >&2 || fail "apt-get update failed"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2 ||
			fail "apt-get install chromium failed"
	fi
	log "$("$CHROMIUM" --version 2>/dev/null || echo "chromium (version unknown)") at $CHROMIUM"
}

install_playwright() {
	local pkg="$PREFIX/node_modules/playwright-core/package.json"
	if [[ -f "$pkg" ]] && grep -q "\"version\": \"$PLAYWRIGHT_CORE_VERSION\"" "$pkg"; then
		log "playwright-core $PLAYWRIGHT_CORE_VERSION already installed: $PREFIX"
		return
	fi
	command -v npm >/dev/null || fail "no npm on PATH (needed to install playwright-core)"
	log "installing playwright-core@$PLAYWRIGHT_CORE_VERSION (npm) into $PREFIX"
	mkdir -p "$PREFIX"
	npm install --prefix "$PREFIX" --no-audit --no-fund "playwright-core@$PLAYWRIGHT_CORE_VERSION" >&2 ||
		fail "npm install playwright-core@$PLAYWRIGHT_CORE_VERSION failed"
	log "installed playwright-core $PLAYWRIGHT_CORE_VERSION"
}

case "${1:-install}" in
install)
	install_chromium
	install_playwright
	;;
env)
	install_chromium
	install_playwright
	# Exported, so that the node started after the eval sees them.
	printf 'export HYPERCLOUD_CHROMIUM=%q\n' "$CHROMIUM"
	printf 'export HYPERCLOUD_PLAYWRIGHT=%q\n' "$PREFIX"
	;;
*) fail "usage: hack/ui-tools.sh [install|env]" ;;
esac
