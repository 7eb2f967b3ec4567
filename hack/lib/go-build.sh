# shellcheck shell=bash
# What hack/envtest.sh and hack/cluster.sh share (sourced): steps named in every failure, and the
# Go environment the builds from the module proxy use. The caller sets TAG (the message prefix)
# and CACHE (the cache root) first.
#
#   step NAME        start a step (logged to stderr)
#   fail MESSAGE     `TAG: step "NAME" failed: MESSAGE` on stderr, exit 1
#   go_env           check the toolchain and export GOWORK, GOFLAGS, GOMODCACHE
#   heartbeat WHAT MINUTES / heartbeat_stop
#                    around a long build: say what a first build costs, then every 30 s that
#                    WHAT is still building (a build from the module proxy prints nothing for
#                    minutes; a newcomer cannot tell it from a hang)
#   kube_ldflags     the -ldflags that make a Kubernetes component report $KUBERNETES_VERSION

STEP="setup"
log() { printf '%s: %s\n' "$TAG" "$*" >&2; }
step() { STEP="$1"; log "$1"; }
# fail MESSAGE: name the current step and stop.
fail() { printf '%s: step "%s" failed: %s\n' "$TAG" "$STEP" "$*" >&2; exit 1; }
# Anything that fails without an explicit `fail` still names its step.
on_err() { printf '%s: step "%s" failed (exit %s at line %s)\n' "$TAG" "$STEP" "$1" "$2" >&2; exit "$1"; }
trap 'on_err $? $LINENO' ERR

go_env() {
	command -v go >/dev/null || fail "no go toolchain on PATH (install Go >= 1.24, see README 'Testing: prerequisites')"
	# The modules under hack/tools are self-contained; ignore any go.work around the clone.
	export GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly -modcacherw"
	# Downloaded modules live in the cache too (the build cache is $HOME/.cache/go-build by
	# default), so a CI that keeps $HOME/.cache rebuilds nothing.
	export GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}"
}

# kube_ldflags: what `--version` and /version of a component built from k8s.io/kubernetes report
# (upstream sets these in hack/lib/version.sh); without them it says v0.0.0-master.
heartbeat() {
	local what="$1" minutes="$2"
	log "$what: a first build takes about $minutes min on 2 cores; it is cached afterwards"
	# Ends by itself when this script does (a `fail` exits without stopping it).
	(
		start=$SECONDS
		while sleep 30 && kill -0 $$ 2>/dev/null; do
			log "$what: still building ($((SECONDS - start))s)"
		done
	) &
	HEARTBEAT_PID=$!
}

heartbeat_stop() {
	if [[ -n "${HEARTBEAT_PID:-}" ]]; then
		kill "$HEARTBEAT_PID" 2>/dev/null || true
		wait "$HEARTBEAT_PID" 2>/dev/null || true
	fi
	HEARTBEAT_PID=""
}

kube_ldflags() {
	local minor="${KUBERNETES_VERSION#v1.}" flags="-s -w" pkg
	minor="${minor%%.*}"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
	done
	echo "$flags"
}
