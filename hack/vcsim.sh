#!/usr/bin/env bash
# vcsim: VMware's vCenter simulator (govmomi) and govc, for the vsphere provider's tests and demo.
#
#   hack/vcsim.sh build           build vcsim and govc at GOVMOMI_VERSION (hack/versions.env) into
#                                 $HYPERCLOUD_CACHE/govmomi/bin/<version>/ (skipped when built)
#   hack/vcsim.sh bin             print that directory (building first when needed)
#   hack/vcsim.sh start DIR [--host ADDR] [VCSIM FLAGS...]
#                                 start vcsim on a free port of 127.0.0.1 (or the loopback
#                                 address ADDR, e.g. 127.0.0.2: a second vCenter of another
#                                 server name) with user "user", password "pass" and the default
#                                 inventory (or the flags given, e.g. -dc 2 -host 2 -vm 3), wait
#                                 until it answers, and write DIR/env.sh (GOVC_URL, GOVC_INSECURE,
#                                 VCSIM_HOST, VCSIM_PORT, VCSIM_BIN) and DIR/vsphere.conf (a legacy
#                                 INI config for it); print env.sh
#   hack/vcsim.sh stop DIR        stop the vcsim `start` started in DIR (by its recorded pid)
#
# Every failure ends with `vcsim: step "<step>" failed: ...` on stderr and a non-zero exit.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.env
source "$ROOT/hack/versions.env"
CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
BIN="$CACHE/govmomi/bin/$GOVMOMI_VERSION"
MODULE=github.com/vmware/govmomi

STEP="setup"
log() { printf 'vcsim: %s\n' "$*" >&2; }
step() { STEP="$1"; log "$1"; }
fail() { printf 'vcsim: step "%s" failed: %s\n' "$STEP" "$*" >&2; exit 1; }
trap 'printf "vcsim: step \"%s\" failed (exit %s at line %s)\n" "$STEP" "$?" "$LINENO" >&2' ERR

cmd_build() {
	if [[ -x "$BIN/vcsim" && -x "$BIN/govc" && -f "$BIN/.complete" ]]; then
		return
	fi
	step "build vcsim and govc $GOVMOMI_VERSION"
	command -v go >/dev/null || fail "no go toolchain on PATH (see README 'Testing: prerequisites')"
	local tmp="$BIN.tmp.$$" start=$SECONDS
	rm -rf "$BIN".tmp.*
	mkdir -p "$tmp"
	# `go install pkg@version` builds with the module's own go.mod and go.sum: nothing to pin
	# beside the version. Downloads go to the shared module cache of hack/envtest.sh.
	GOWORK=off GOFLAGS=-modcacherw GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}" GOBIN="$tmp" \
		go install -trimpath -ldflags "-s -w" "$MODULE/vcsim@$GOVMOMI_VERSION" "$MODULE/govc@$GOVMOMI_VERSION" ||
		fail "go install $MODULE/{vcsim,govc}@$GOVMOMI_VERSION"
	"$tmp/govc" version >/dev/null || fail "the built govc does not run"
	touch "$tmp/.complete"
	rm -rf "$BIN"
	mv "$tmp" "$BIN"
	log "built vcsim and govc in $((SECONDS - start))s into $BIN"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

cmd_start() {
	local dir="${1:?usage: hack/vcsim.sh start DIR [--host ADDR] [VCSIM FLAGS...]}" host=127.0.0.1
	shift
	if [[ "${1:-}" == --host ]]; then
		host="${2:?--host needs a loopback address}"
		shift 2
	fi
	[[ "$host" == 127.* ]] || fail "--host $host is not a loopback address (127.x.y.z)"
	cmd_build
	mkdir -p "$dir"
	cmd_stop "$dir" 2>/dev/null || true
	step "start vcsim"
	local port
	port="$(free_port)"
	setsid "$BIN/vcsim" -l "$host:$port" -username user -password pass "$@" \
		</dev/null >"$dir/vcsim.log" 2>&1 &
	echo $! >"$dir/vcsim.pid"
	step "wait for vcsim on $host:$port"
	local deadline=$((SECONDS + 60))
	until GOVC_URL="https://user:pass@$host:$port/sdk" GOVC_INSECURE=1 "$BIN/govc" about >/dev/null 2>&1; do
		kill -0 "$(cat "$dir/vcsim.pid")" 2>/dev/null || { tail -n 20 "$dir/vcsim.log" >&2; fail "vcsim exited (see $dir/vcsim.log)"; }
		((SECONDS < deadline)) || fail "vcsim not answering after 60s (see $dir/vcsim.log)"
		sleep 0.2
	done
	cat >"$dir/env.sh" <<ENV
export GOVC_URL=https://user:pass@$host:$port/sdk
export GOVC_INSECURE=1
export VCSIM_HOST=$host
export VCSIM_PORT=$port
export VCSIM_BIN=$BIN
ENV
	cat >"$dir/vsphere.conf" <<CONF
[Global]
user = "user"
password = "pass"
port = "$port"
insecure-flag = "1"
datacenters = "DC0"

[VirtualCenter "$host"]

[Labels]
region = "k8s-region"
zone = "k8s-zone"
CONF
	log "vcsim ready on $host:$port (log $dir/vcsim.log)"
	cat "$dir/env.sh"
}

cmd_stop() {
	local dir="${1:?usage: hack/vcsim.sh stop DIR}" pid
	[[ -f "$dir/vcsim.pid" ]] || return 0
	pid="$(cat "$dir/vcsim.pid")"
	if [[ -r "/proc/$pid/cmdline" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$BIN/vcsim"; then
		kill -TERM "$pid" 2>/dev/null || true
		log "stopped vcsim (pid $pid)"
	fi
	rm -f "$dir/vcsim.pid"
}

case "${1:-}" in
build) cmd_build ;;
bin) cmd_build && echo "$BIN" ;;
start) shift && cmd_start "$@" ;;
stop) shift && cmd_stop "$@" ;;
*)
	sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
