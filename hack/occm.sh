#!/usr/bin/env bash
# occm: the upstream OpenStack cloud-controller-manager (k8s.io/cloud-provider-openstack
# cmd/openstack-cloud-controller-manager at $OCCM_VERSION of hack/versions.env), unpatched,
# built from the Go module proxy for hack/bench/lb-occm.sh (issue #34). Its go.mod has replace
# directives, which `go install path@version` refuses: the module is downloaded (`go mod
# download`, checked against the checksum database), copied out of the read-only module cache
# and built in the copy with its own go.mod and go.sum (as hack/csi-tools.sh builds the sidecars).
#
#   hack/occm.sh build   build it into $HYPERCLOUD_CACHE/occm/<version>/ (skipped when built)
#   hack/occm.sh bin     print the binary's path (builds first when needed)
#
# The binary reports its pin: `openstack-cloud-controller-manager --version` prints the
# version set with -ldflags -X as upstream's Makefile does; the build checks that before it
# keeps the binary.
#
# Environment:
#   HYPERCLOUD_CACHE   cache root (default $HOME/.cache/hypercloud)
#   HYPERCLOUD_OCCM    `bin` prints this binary instead of building
#   GOMODCACHE         Go module cache (default $HYPERCLOUD_CACHE/go/mod, shared with the other
#                      Go builds of hack/; the build cache is Go's default)
#
# Every failure ends with `occm: step "<step>" failed: ...` on stderr and a non-zero exit.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.env
source "$ROOT/hack/versions.env"

CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
MODULE=k8s.io/cloud-provider-openstack
TOOL=openstack-cloud-controller-manager
BUILT="$CACHE/occm/$OCCM_VERSION/$TOOL"

TAG=occm
# shellcheck source=hack/lib/go-build.sh
source "$ROOT/hack/lib/go-build.sh"

# reports BINARY: whether BINARY prints the pinned version.
reports() {
	local out
	out="$("$1" --version 2>&1)" || return 1
	[[ "$out" == *"$OCCM_VERSION"* ]]
}

cmd_build() {
	if [[ -x "$BUILT" ]]; then
		log "$TOOL $OCCM_VERSION already built: $BUILT"
		return
	fi
	step "find go toolchain"
	go_env
	mkdir -p "$(dirname "$BUILT")"
	local start=$SECONDS dir src
	# Built aside and moved in once it reports its pin; removed however the script ends.
	BUILD_DIR="$(mktemp -d "$CACHE/occm/build.XXXXXX")"
	trap 'rm -rf "${BUILD_DIR:-}"' EXIT
	step "download $MODULE@$OCCM_VERSION"
	dir="$(go mod download -json "$MODULE@$OCCM_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')" ||
		fail "go mod download $MODULE@$OCCM_VERSION"
	[[ -d "$dir" ]] || fail "go mod download $MODULE@$OCCM_VERSION named no directory"
	src="$BUILD_DIR/src"
	cp -R "$dir" "$src"
	chmod -R u+w "$src"
	step "build $TOOL $OCCM_VERSION"
	# Measured cold (empty Go caches for its module graph, another build sharing the 2 cores):
	# see docs/openstack-provider.md "Scale".
	heartbeat "$TOOL" 8
	# The two -X are upstream's Makefile's LDFLAGS (`--version` prints component-base's).
	(cd "$src" && GOFLAGS="-mod=mod -modcacherw" CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$OCCM_VERSION -X $MODULE/pkg/version.Version=$OCCM_VERSION" \
		-o "$BUILD_DIR/$TOOL" "./cmd/$TOOL") ||
		fail "go build ./cmd/$TOOL in a copy of $MODULE@$OCCM_VERSION"
	heartbeat_stop
	reports "$BUILD_DIR/$TOOL" || fail "the built $TOOL does not report $OCCM_VERSION: $("$BUILD_DIR/$TOOL" --version 2>&1 | head -3 || true)"
	mv -f "$BUILD_DIR/$TOOL" "$BUILT"
	log "built $TOOL $OCCM_VERSION in $((SECONDS - start))s: $BUILT"
}

cmd_bin() {
	if [[ -n "${HYPERCLOUD_OCCM:-}" ]]; then
		echo "$HYPERCLOUD_OCCM"
		return
	fi
	cmd_build
	echo "$BUILT"
}

case "${1:-}" in
build) cmd_build ;;
bin) cmd_bin ;;
*)
	sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
