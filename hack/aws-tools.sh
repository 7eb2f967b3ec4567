#!/usr/bin/env bash
# The real AWS-side servers and clients of the aws provider's tests and demo, pinned and cached:
#   - moto server and the official aws CLI (PyPI; hack/python-tools.sh aws, venv $HYPERCLOUD_CACHE/venv-aws)
#   - Amazon's amazon-ec2-metadata-mock (Go module proxy; version in hack/versions.env), built into
#     $HYPERCLOUD_CACHE/aws/bin/ec2-metadata-mock-<version>
#
#   hack/aws-tools.sh install   install/build whatever is missing (idempotent), print the paths
#   hack/aws-tools.sh env       print HYPERCLOUD_MOTO_SERVER, HYPERCLOUD_AWS_CLI, HYPERCLOUD_EC2_METADATA_MOCK
#                               (what pkg/testenv and hack/lib/cloud-aws.sh read): eval "$(hack/aws-tools.sh env)"
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.env
source "$ROOT/hack/versions.env"
CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
MOCK="$CACHE/aws/bin/ec2-metadata-mock-$EC2_METADATA_MOCK_VERSION"
VENV="$CACHE/venv-aws"

log() { printf 'aws-tools: %s\n' "$*" >&2; }
fail() { printf 'aws-tools: %s\n' "$*" >&2; exit 1; }

build_mock() {
	if [[ -x "$MOCK" ]]; then
		log "ec2-metadata-mock $EC2_METADATA_MOCK_VERSION already built: $MOCK"
		return
	fi
	command -v go >/dev/null || fail "no go toolchain on PATH (needed to build amazon-ec2-metadata-mock)"
	local tmp
	tmp="$(mktemp -d "$CACHE/aws-mock-build.XXXXXX")"
	log "building github.com/aws/amazon-ec2-metadata-mock/cmd/ec2-metadata-mock@$EC2_METADATA_MOCK_VERSION"
	GOWORK=off GOFLAGS=-modcacherw GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}" GOBIN="$tmp" \
		go install -trimpath -ldflags "-s -w" \
		"github.com/aws/amazon-ec2-metadata-mock/cmd/ec2-metadata-mock@$EC2_METADATA_MOCK_VERSION" ||
		fail "go install amazon-ec2-metadata-mock failed"
	mkdir -p "$(dirname "$MOCK")"
	mv "$tmp/ec2-metadata-mock" "$MOCK"
	rm -rf "$tmp"
	log "built $MOCK"
}

cmd_env() {
	echo "export HYPERCLOUD_MOTO_SERVER=$VENV/bin/moto_server"
	echo "export HYPERCLOUD_AWS_CLI=$VENV/bin/aws"
	echo "export HYPERCLOUD_EC2_METADATA_MOCK=$MOCK"
}

case "${1:-install}" in
install)
	mkdir -p "$CACHE"
	"$ROOT/hack/python-tools.sh" aws >&2
	build_mock
	cmd_env
	;;
env) cmd_env ;;
*) fail "usage: hack/aws-tools.sh [install|env]" ;;
esac
