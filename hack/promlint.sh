#!/usr/bin/env bash
# Prints the path of the metrics linter, building it first when missing: hack/tools/promlint,
# client_golang's testutil/promlint (the linter `promtool check metrics` runs) at
# CLIENT_GOLANG_VERSION of hack/versions.env, built from the Go module proxy into
# $HYPERCLOUD_CACHE/promlint/<version>. cmd/hypercloud/tests/it/ccm_runtime.rs runs it on the
# controller managers' /metrics. Usage: `curl ... /metrics | "$(hack/promlint.sh)"`.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=promlint
CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
# shellcheck source=hack/lib/go-build.sh
source hack/lib/go-build.sh
# shellcheck source=hack/versions.env
source hack/versions.env
bin="$CACHE/promlint/$CLIENT_GOLANG_VERSION/promlint"
if [[ ! -x "$bin" ]]; then
	go_env
	step "pin client_golang"
	grep -q "github.com/prometheus/client_golang $CLIENT_GOLANG_VERSION\$" hack/tools/promlint/go.mod ||
		fail "hack/tools/promlint/go.mod does not require client_golang $CLIENT_GOLANG_VERSION: edit it and run 'go mod tidy' there"
	step "build hack/tools/promlint"
	mkdir -p "$(dirname "$bin")"
	# Built aside and moved: tests running at once may build it together.
	tmp="$(mktemp "$bin.XXXXXX")"
	(cd hack/tools/promlint && go build -trimpath -ldflags "-s -w" -o "$tmp" .) ||
		{ rm -f "$tmp"; fail "go build hack/tools/promlint"; }
	mv -f "$tmp" "$bin"
fi
echo "$bin"
