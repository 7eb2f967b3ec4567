#!/usr/bin/env bash
# Prints the path of helm, building it first when missing: helm.sh/helm/v3/cmd/helm at
# HELM_VERSION of hack/versions.env, built from the Go module proxy (`go install path@version`:
# helm's own go.mod and go.sum, checked against the checksum database) into
# $HYPERCLOUD_CACHE/helm/<version>. cmd/hypercloud/tests/it/deploy_manifests.rs lints, renders and
# server-dry-runs deploy/helm/hypercloud with it. Usage: `HELM="$(hack/helm.sh)"`.
# Progress goes to stderr; only the path goes to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=helm
CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
# shellcheck source=hack/lib/go-build.sh
source hack/lib/go-build.sh
# shellcheck source=hack/versions.env
source hack/versions.env
dir="$CACHE/helm/$HELM_VERSION"
bin="$dir/helm"
if [[ -x "$bin" ]]; then
	log "helm $HELM_VERSION already built: $bin"
else
	go_env
	step "build helm $HELM_VERSION (go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION)"
	start=$SECONDS
	heartbeat helm 4
	mkdir -p "$dir"
	# Built aside and moved: tests running at once may build it together.
	tmp="$(mktemp -d "$dir/build.XXXXXX")"
	(GOBIN="$tmp" go install -trimpath \
		-ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
		"helm.sh/helm/v3/cmd/helm@$HELM_VERSION") ||
		{ rm -rf "$tmp"; fail "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION"; }
	heartbeat_stop
	mv -f "$tmp/helm" "$bin"
	rm -rf "$tmp"
	log "built helm $HELM_VERSION in $((SECONDS - start))s; cached at $bin"
fi
echo "$bin"
