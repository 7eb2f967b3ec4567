#!/usr/bin/env bash
# csi-tools: the upstream CSI test tool and sidecars, unchanged, built from the Go module proxy at
# the versions pinned in hack/versions.env (issue #32):
#   csi-sanity       github.com/kubernetes-csi/csi-test/v5 ($CSI_SANITY_VERSION), `go install @version`
#   csi-provisioner  github.com/kubernetes-csi/external-provisioner/v6 ($CSI_PROVISIONER_VERSION)
#   csi-attacher     github.com/kubernetes-csi/external-attacher/v4 ($CSI_ATTACHER_VERSION)
#   csi-resizer      github.com/kubernetes-csi/external-resizer/v2 ($CSI_RESIZER_VERSION)
# The sidecars' go.mod have replace directives, which `go install path@version` refuses: their
# module is downloaded (`go mod download`, checked against the checksum database), copied out of
# the read-only module cache and built in the copy with its own go.mod and go.sum.
#
#   hack/csi-tools.sh build   build whichever of the four is missing into
#                             $HYPERCLOUD_CACHE/csi-tools/<versions>/bin/ (skipped when built)
#   hack/csi-tools.sh bin     print that directory (builds first when needed)
#
# Each binary reports its pin: `csi-provisioner --version` (and csi-attacher, csi-resizer) print
# `<path> v6.4.0`, `csi-sanity -version` prints `Version = v5.6.0` (set with -ldflags -X as the
# upstream Makefiles do); the build checks that before it keeps a binary.
#
# Environment:
#   HYPERCLOUD_CACHE          cache root (default $HOME/.cache/hypercloud)
#   HYPERCLOUD_CSI_TOOLS_BIN  `bin` prints this dir instead of building
#   GOMODCACHE                Go module cache (default $HYPERCLOUD_CACHE/go/mod, shared with the
#                             other Go builds of hack/; the build cache is Go's default)
#
# Every failure ends with `csi-tools: step "<step>" failed: ...` on stderr and a non-zero exit.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.env
source "$ROOT/hack/versions.env"

CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
VERSIONS="sanity-$CSI_SANITY_VERSION-provisioner-$CSI_PROVISIONER_VERSION-attacher-$CSI_ATTACHER_VERSION-resizer-$CSI_RESIZER_VERSION"
BUILT_BIN="$CACHE/csi-tools/$VERSIONS/bin"
TOOLS=(csi-sanity csi-provisioner csi-attacher csi-resizer)

TAG=csi-tools
# shellcheck source=hack/lib/go-build.sh
source "$ROOT/hack/lib/go-build.sh"

# module TOOL / version TOOL: where each tool comes from.
module() {
	case "$1" in
	csi-sanity) echo github.com/kubernetes-csi/csi-test/v5 ;;
	csi-provisioner) echo github.com/kubernetes-csi/external-provisioner/v6 ;;
	csi-attacher) echo github.com/kubernetes-csi/external-attacher/v4 ;;
	csi-resizer) echo github.com/kubernetes-csi/external-resizer/v2 ;;
	esac
}
version() {
	case "$1" in
	csi-sanity) echo "$CSI_SANITY_VERSION" ;;
	csi-provisioner) echo "$CSI_PROVISIONER_VERSION" ;;
	csi-attacher) echo "$CSI_ATTACHER_VERSION" ;;
	csi-resizer) echo "$CSI_RESIZER_VERSION" ;;
	esac
}

# version_output TOOL BINARY: what BINARY says its version is.
version_output() {
	if [[ "$1" == csi-sanity ]]; then "$2" -version 2>&1; else "$2" --version 2>&1; fi
}

# reports TOOL BINARY: whether BINARY prints the pinned version of TOOL.
reports() {
	local out
	out="$(version_output "$1" "$2")" || return 1
	if [[ "$1" == csi-sanity ]]; then
		[[ "$out" == "Version = $(version "$1")" ]]
	else
		[[ "$out" == *" $(version "$1")" ]]
	fi
}

complete() {
	local tool
	for tool in "${TOOLS[@]}"; do
		[[ -x "$BUILT_BIN/$tool" ]] || return 1
	done
}

# build_sanity OUT: csi-sanity has no replace directives, so `go install path@version` builds
# it with exactly its own go.mod and go.sum. Its VERSION variable is what cmd/csi-sanity/Makefile
# sets (-X ...VERSION; in package main the symbol is main.VERSION).
build_sanity() {
	local out="$1" module
	module="$(module csi-sanity)"
	(GOBIN="$out" CGO_ENABLED=0 go install -trimpath \
		-ldflags "-s -w -X main.VERSION=$CSI_SANITY_VERSION" \
		"$module/cmd/csi-sanity@$CSI_SANITY_VERSION") ||
		fail "go install $module/cmd/csi-sanity@$CSI_SANITY_VERSION"
}

# build_sidecar TOOL OUT: download the module, copy it out of the module cache (read-only, and
# -mod=mod may complete go.sum in place) and build cmd/TOOL there; -X main.version is what the
# sidecars' release-tools/build.make sets.
build_sidecar() {
	local tool="$1" out="$2" module version dir src
	module="$(module "$tool")"
	version="$(version "$tool")"
	dir="$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')" ||
		fail "go mod download $module@$version"
	[[ -d "$dir" ]] || fail "go mod download $module@$version named no directory"
	src="$out/src"
	cp -R "$dir" "$src"
	chmod -R u+w "$src"
	(cd "$src" && GOFLAGS="-mod=mod -modcacherw" CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X main.version=$version" -o "$out/$tool" "./cmd/$tool") ||
		fail "go build ./cmd/$tool in a copy of $module@$version"
	rm -rf "$src"
}

cmd_build() {
	if complete; then
		log "csi-sanity $CSI_SANITY_VERSION, csi-provisioner $CSI_PROVISIONER_VERSION, csi-attacher $CSI_ATTACHER_VERSION, csi-resizer $CSI_RESIZER_VERSION already built in $BUILT_BIN"
		return
	fi
	step "find go toolchain"
	go_env
	mkdir -p "$BUILT_BIN"
	local tool start total=$SECONDS
	# The build dir of the tool being built (a module copy and a binary): removed however the
	# script ends, so a failed build leaves nothing behind.
	BUILD_DIR=""
	trap 'rm -rf "${BUILD_DIR:-}"' EXIT
	for tool in "${TOOLS[@]}"; do
		[[ -x "$BUILT_BIN/$tool" ]] && continue
		step "build $tool $(version "$tool") ($(module "$tool"))"
		start=$SECONDS
		# Built aside and moved in once it reports its pin: tests running at once may build
		# together, and a binary in $BUILT_BIN is always a finished one.
		BUILD_DIR="$(mktemp -d "$CACHE/csi-tools/$tool.build.XXXXXX")"
		# Measured with the Go caches of the other builds warm but other builds sharing the
		# cores (load 4-7): csi-sanity 29 s, the sidecars 5-10 min each (each its own
		# k8s.io library versions, so they share little).
		if [[ "$tool" == csi-sanity ]]; then heartbeat "$tool" 1; else heartbeat "$tool" 6; fi
		if [[ "$tool" == csi-sanity ]]; then
			build_sanity "$BUILD_DIR"
		else
			build_sidecar "$tool" "$BUILD_DIR"
		fi
		heartbeat_stop
		reports "$tool" "$BUILD_DIR/$tool" ||
			fail "the built $tool does not report $(version "$tool"): $(version_output "$tool" "$BUILD_DIR/$tool" || true)"
		mv -f "$BUILD_DIR/$tool" "$BUILT_BIN/$tool"
		rm -rf "$BUILD_DIR"
		log "built $tool $(version "$tool") in $((SECONDS - start))s"
	done
	log "csi-sanity, csi-provisioner, csi-attacher and csi-resizer are in $BUILT_BIN (built in $((SECONDS - total))s)"
}

cmd_bin() {
	if [[ -n "${HYPERCLOUD_CSI_TOOLS_BIN:-}" ]]; then
		echo "$HYPERCLOUD_CSI_TOOLS_BIN"
		return
	fi
	cmd_build
	echo "$BUILT_BIN"
}

case "${1:-}" in
build) cmd_build ;;
bin) cmd_bin ;;
*)
	sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
