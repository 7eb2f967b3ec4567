#!/usr/bin/env bash
# envtest: a real kube-apiserver + etcd for hypercloud's tests (upstream equivalent:
# controller-runtime's setup-envtest + envtest, but built from the Go module proxy).
#
#   hack/envtest.sh build   build the pinned kube-apiserver and etcd (hack/versions.env) into
#                           $HYPERCLOUD_CACHE/envtest/bin/<versions>/ (skipped when already built)
#   hack/envtest.sh start   start etcd + kube-apiserver on free 127.0.0.1 ports, wait for /readyz,
#                           print the env to use on stdout:  eval "$(hack/envtest.sh start)"
#   hack/envtest.sh env     print that env again for a running control plane
#   hack/envtest.sh stop    stop the processes `start` started (by their recorded pids)
#   hack/envtest.sh pin     regenerate hack/tools/envtest/go.mod + go.sum from hack/versions.env
#   hack/envtest.sh build-kubectl
#                           build kubectl (same version and module graph as kube-apiserver) into
#                           $HYPERCLOUD_CACHE/kubectl/<version>/ when missing; print its path on stdout:
#                           KUBECTL="$(hack/envtest.sh build-kubectl)"
#
# Environment:
#   HYPERCLOUD_CACHE          cache root (default $HOME/.cache/hypercloud)
#   HYPERCLOUD_ENVTEST_DIR    run dir: certs, etcd data, pids, logs (default $HYPERCLOUD_CACHE/envtest/run)
#   HYPERCLOUD_ENVTEST_BIN    use the kube-apiserver and etcd in this dir instead of building them
#   GOMODCACHE                Go module cache (default $HYPERCLOUD_CACHE/go/mod)
#   HYPERCLOUD_ENVTEST_SERVICE_CIDR   Service IP range (default 10.0.0.0/24; 10.0.0.0/16 to /24)
#   HYPERCLOUD_ENVTEST_NODE_PORT_RANGE  NodePort range (default upstream's 30000-32767)
#   HYPERCLOUD_ENVTEST_OWNER_PID  when set, `start` also leaves a watchdog that runs `stop` once
#                             that process exits (pkg/testenv passes the test binary's pid)
#
# Every failure ends with `envtest: step "<step>" failed: ...` on stderr and a non-zero exit.
# Only the env lines go to stdout; progress goes to stderr.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT="$ROOT/hack/envtest.sh"
TOOLS="$ROOT/hack/tools/envtest"
# shellcheck source=hack/versions.env
source "$ROOT/hack/versions.env"

CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
RUN="${HYPERCLOUD_ENVTEST_DIR:-$CACHE/envtest/run}"
BUILT_BIN="$CACHE/envtest/bin/kubernetes-$KUBERNETES_VERSION-etcd-$ETCD_VERSION"
BIN="${HYPERCLOUD_ENVTEST_BIN:-$BUILT_BIN}"
READY_TIMEOUT="${HYPERCLOUD_ENVTEST_READY_TIMEOUT:-90}"

TAG=envtest
# shellcheck source=hack/lib/go-build.sh
source "$ROOT/hack/lib/go-build.sh"

# ---------------------------------------------------------------- build

check_pins() {
	step "check hack/tools/envtest pins against hack/versions.env"
	local kube etcd
	kube="$(cd "$TOOLS" && go list -m -f '{{.Version}}' k8s.io/kubernetes)" ||
		fail "go list -m k8s.io/kubernetes in hack/tools/envtest"
	[[ "$kube" == "$KUBERNETES_VERSION" ]] ||
		fail "hack/tools/envtest/go.mod requires k8s.io/kubernetes $kube, hack/versions.env says $KUBERNETES_VERSION; run hack/envtest.sh pin"
	etcd="$(cd "$TOOLS" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)" ||
		fail "go list -m go.etcd.io/etcd/server/v3 in hack/tools/envtest"
	[[ "$etcd" == "$ETCD_VERSION" ]] ||
		fail "kubernetes $KUBERNETES_VERSION pins etcd $etcd but hack/versions.env says ETCD_VERSION=$ETCD_VERSION"
}

cmd_build() {
	if [[ -x "$BUILT_BIN/kube-apiserver" && -x "$BUILT_BIN/etcd" && -f "$BUILT_BIN/.complete" ]]; then
		log "kube-apiserver $KUBERNETES_VERSION and etcd $ETCD_VERSION already built in $BUILT_BIN"
		return
	fi
	step "find go toolchain"
	go_env
	check_pins
	local tmp ldflags start
	tmp="$BUILT_BIN.tmp.$$"
	rm -rf "$BUILT_BIN".tmp.*
	mkdir -p "$tmp"
	ldflags="$(kube_ldflags)"

	step "build kube-apiserver $KUBERNETES_VERSION"
	start=$SECONDS
	heartbeat kube-apiserver 6
	(cd "$TOOLS" && go build -trimpath -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver) ||
		fail "go build k8s.io/kubernetes/cmd/kube-apiserver"
	heartbeat_stop
	log "built kube-apiserver in $((SECONDS - start))s"

	step "build etcd $ETCD_VERSION"
	start=$SECONDS
	heartbeat etcd 2
	(cd "$TOOLS" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" ./etcd) ||
		fail "go build hack/tools/envtest/etcd"
	heartbeat_stop
	log "built etcd in $((SECONDS - start))s"

	step "verify built binaries"
	local version
	version="$("$tmp/kube-apiserver" --version 2>&1)" || true
	[[ "$version" == "Kubernetes $KUBERNETES_VERSION" ]] ||
		fail "kube-apiserver --version says '$version', not Kubernetes $KUBERNETES_VERSION"
	version="$("$tmp/etcd" --version 2>&1)" || true
	[[ "$version" == *"etcd Version: ${ETCD_VERSION#v}"* ]] ||
		fail "etcd --version does not report ${ETCD_VERSION#v}: $version"
	touch "$tmp/.complete"
	rm -rf "$BUILT_BIN"
	mv "$tmp" "$BUILT_BIN"
	log "kube-apiserver and etcd are in $BUILT_BIN"
}

# kubectl lives in a directory of its own (not BUILT_BIN), so adding it did not invalidate the
# cached kube-apiserver + etcd, and scripts that need only kubectl do not build the apiserver.
KUBECTL_BIN="$CACHE/kubectl/$KUBERNETES_VERSION/kubectl"

cmd_build_kubectl() {
	if [[ -x "$KUBECTL_BIN" && -f "$KUBECTL_BIN.complete" ]]; then
		log "kubectl $KUBERNETES_VERSION already built: $KUBECTL_BIN"
		echo "$KUBECTL_BIN"
		return
	fi
	step "find go toolchain"
	go_env
	check_pins
	local tmp start version
	mkdir -p "$(dirname "$KUBECTL_BIN")"
	tmp="$KUBECTL_BIN.tmp.$$"
	step "build kubectl $KUBERNETES_VERSION"
	start=$SECONDS
	(cd "$TOOLS" && go build -trimpath -ldflags "$(kube_ldflags)" -o "$tmp" k8s.io/kubernetes/cmd/kubectl) ||
		fail "go build k8s.io/kubernetes/cmd/kubectl"
	log "built kubectl in $((SECONDS - start))s"
	step "verify kubectl"
	version="$("$tmp" version --client 2>&1)" || true
	[[ "$version" == *"Client Version: $KUBERNETES_VERSION"* ]] ||
		fail "kubectl version --client says '$version', not $KUBERNETES_VERSION"
	mv "$tmp" "$KUBECTL_BIN"
	touch "$KUBECTL_BIN.complete"
	log "kubectl is $KUBECTL_BIN"
	echo "$KUBECTL_BIN"
}

cmd_pin() {
	step "find go toolchain"
	go_env
	export GOFLAGS="${GOFLAGS/-mod=readonly/-mod=mod}"
	step "download k8s.io/kubernetes $KUBERNETES_VERSION go.mod"
	local gomod staging
	gomod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
	[[ -f "$gomod" ]] || fail "go mod download k8s.io/kubernetes@$KUBERNETES_VERSION gave no go.mod"
	step "write hack/tools/envtest/go.mod"
	# k8s.io/kubernetes replaces its staging modules with ./staging/...; a module that
	# requires it must pin each of them to the matching published v0.<minor>.<patch>.
	staging="v0.${KUBERNETES_VERSION#v1.}"
	{
		echo "// Generated by \`hack/envtest.sh pin\` from hack/versions.env. Do not edit by hand."
		echo "module hypercloud.local/hack/tools/envtest"
		echo
		echo "go $(sed -n 's/^go //p' "$gomod")"
		echo
		echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
		echo
		echo "replace ("
		awk -v v="$staging" '$2 == "=>" && $3 ~ /^\.\/staging\// { print "\t" $1 " => " $1 " " v }' "$gomod"
		echo ")"
	} >"$TOOLS/go.mod"
	rm -f "$TOOLS/go.sum"
	step "go mod tidy in hack/tools/envtest"
	(cd "$TOOLS" && go mod tidy) || fail "go mod tidy"
	export GOFLAGS="${GOFLAGS/-mod=mod/-mod=readonly}"
	check_pins
	log "pinned; now run hack/envtest.sh build"
}

# ---------------------------------------------------------------- start / stop

# alive PIDFILE: the recorded process is still running and is still ours.
alive() {
	local pid
	[[ -f "$1" ]] || return 1
	pid="$(cat "$1")"
	[[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$RUN/"
}

port_in_use() {
	if command -v ss >/dev/null; then
		ss -Htln "sport = :$1" | grep -q .
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

# free_port: a TCP port nobody listens on right now, outside the ephemeral range.
free_port() {
	local port i
	for i in $(seq 1 200); do
		port=$((20000 + RANDOM % 12000))
		if ! port_in_use "$port" && ! grep -qx "$port" "$RUN/ports" 2>/dev/null; then
			echo "$port" >>"$RUN/ports"
			echo "$port"
			return
		fi
	done
	fail "no free loopback port found"
}

print_env() {
	cat "$RUN/env.sh"
}

# sign NAME SUBJECT EXTENSIONS: an EC key and a certificate signed by the envtest CA.
sign() {
	local pki="$RUN/pki"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "$2" &&
		openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
			-days 3650 -out "$pki/$1.crt" -extfile <(printf '%s\n' "$3") &&
		rm -f "$pki/$1.csr"
}

gen_certs() {
	local pki="$RUN/pki" ossl="$RUN/openssl.log"
	step "generate certificates (openssl)"
	command -v openssl >/dev/null || fail "openssl is not installed"
	rm -rf "$pki"
	mkdir -p "$pki"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
		-keyout "$pki/ca.key" -out "$pki/ca.crt" -subj "/CN=hypercloud-envtest-ca" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
		2>>"$ossl" || fail "openssl: CA (see $ossl)"
	sign apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
		2>>"$ossl" || fail "openssl: serving certificate (see $ossl)"
	sign admin "/O=system:masters/CN=hypercloud-envtest-admin" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth" \
		2>>"$ossl" || fail "openssl: admin client certificate (see $ossl)"
	# The service-account token signing key pair.
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key" 2>>"$ossl" &&
		openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>>"$ossl" ||
		fail "openssl: service-account key pair (see $ossl)"
	chmod 600 "$pki"/*.key
	# A static admin token too, for clients that cannot use client certificates.
	ADMIN_TOKEN="$(openssl rand -hex 24)"
	printf '%s,hypercloud-envtest-admin,hypercloud-envtest-admin,"system:masters"\n' "$ADMIN_TOKEN" >"$pki/tokens.csv"
	chmod 600 "$pki/tokens.csv"
}

write_kubeconfig() {
	local b64="base64 -w0"
	cat >"$RUN/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: envtest
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $($b64 <"$RUN/pki/ca.crt")
users:
- name: envtest-admin
  user:
    client-certificate-data: $($b64 <"$RUN/pki/admin.crt")
    client-key-data: $($b64 <"$RUN/pki/admin.key")
- name: envtest-admin-token
  user:
    token: $ADMIN_TOKEN
contexts:
- name: envtest
  context: {cluster: envtest, user: envtest-admin}
- name: envtest-token
  context: {cluster: envtest, user: envtest-admin-token}
current-context: envtest
EOF
	chmod 600 "$RUN/kubeconfig"
}

# running PIDFILE: the process we just started has not exited. Not `alive`: until the fork of
# `setsid PROGRAM &` has exec'd, its command line is still this script's, which `alive` (made to
# tell our process from a reused PID) rejects, and a first poll in that window made `start` fail
# with a healthy apiserver coming up. A zombie (state Z/X) has exited.
running() {
	local pid state
	pid="$(cat "$1" 2>/dev/null)" || return 1
	[[ -n "$pid" && -r "/proc/$pid/stat" ]] || return 1
	state="$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
	[[ -n "$state" && "$state" != Z && "$state" != X ]]
}

# wait_ready NAME PIDFILE LOG URL CURL-ARGS...: poll URL until it answers 200, failing early
# when the process died.
wait_ready() {
	local name="$1" pidfile="$2" logfile="$3" url="$4" deadline=$((SECONDS + READY_TIMEOUT))
	shift 4
	until curl -fsS -o /dev/null --max-time 2 "$@" "$url" 2>/dev/null; do
		if ! running "$pidfile"; then
			tail -n 20 "$logfile" >&2 || true
			fail "$name exited before it was ready (see $logfile)"
		fi
		((SECONDS < deadline)) || fail "$name not ready after ${READY_TIMEOUT}s (see $logfile)"
		sleep 0.3
	done
}

# Run dirs of test binaries and hack/test.sh keep their logs after `stop`; drop them after a day.
prune_old_runs() {
	local dir
	[[ -d "$CACHE/envtest/runs" ]] || return 0
	while IFS= read -r dir; do
		compgen -G "$dir/*.pid" >/dev/null || rm -rf "$dir"
	done < <(find "$CACHE/envtest/runs" -mindepth 1 -maxdepth 1 -type d -mtime +0)
}

cmd_start() {
	mkdir -p "$RUN"
	if alive "$RUN/kube-apiserver.pid" && alive "$RUN/etcd.pid" && [[ -f "$RUN/env.sh" ]]; then
		log "already running in $RUN"
		print_env
		return
	fi
	# Leftovers of an earlier run that died half way.
	cmd_stop >/dev/null 2>&1 || true
	prune_old_runs

	step "find kube-apiserver and etcd binaries"
	if [[ -z "${HYPERCLOUD_ENVTEST_BIN:-}" ]]; then
		cmd_build
		STEP="find kube-apiserver and etcd binaries"
	fi
	[[ -x "$BIN/kube-apiserver" ]] || fail "no kube-apiserver in $BIN (run hack/envtest.sh build, or fix HYPERCLOUD_ENVTEST_BIN)"
	[[ -x "$BIN/etcd" ]] || fail "no etcd in $BIN (run hack/envtest.sh build, or fix HYPERCLOUD_ENVTEST_BIN)"

	step "prepare run dir $RUN"
	rm -rf "$RUN/etcd-data" "$RUN/ports" "$RUN/env.sh" "$RUN/kubeconfig" "$RUN"/*.log
	mkdir -p "$RUN/etcd-data"
	chmod 700 "$RUN/etcd-data"
	# A /24 (254 Service IPs) and upstream's 2768 node ports unless a bench asks for more
	# (hack/bench/compare-upstream.sh --services=5000); the first IP stays 10.0.0.1.
	SERVICE_CIDR="${HYPERCLOUD_ENVTEST_SERVICE_CIDR:-10.0.0.0/24}"
	[[ "$SERVICE_CIDR" =~ ^10\.0\.0\.0/(1[6-9]|2[0-4])$ ]] || fail "HYPERCLOUD_ENVTEST_SERVICE_CIDR=$SERVICE_CIDR: want 10.0.0.0/16 to 10.0.0.0/24"
	NODE_PORT_RANGE="${HYPERCLOUD_ENVTEST_NODE_PORT_RANGE:-30000-32767}"
	[[ "$NODE_PORT_RANGE" =~ ^[1-9][0-9]{3,4}-[1-9][0-9]{3,4}$ ]] || fail "HYPERCLOUD_ENVTEST_NODE_PORT_RANGE=$NODE_PORT_RANGE: want LOW-HIGH"
	SERVICE_IP="10.0.0.1"
	ETCD_PORT="$(free_port)"
	ETCD_PEER_PORT="$(free_port)"
	APISERVER_PORT="$(free_port)"

	gen_certs

	step "start etcd"
	# setsid: the servers outlive this script and the terminal's signals; `stop` ends them.
	setsid "$BIN/etcd" \
		--name=envtest \
		--data-dir="$RUN/etcd-data" \
		--listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster="envtest=http://127.0.0.1:$ETCD_PEER_PORT" \
		--unsafe-no-fsync \
		--log-level=warn \
		</dev/null >"$RUN/etcd.log" 2>&1 &
	echo $! >"$RUN/etcd.pid"
	step "wait for etcd /health"
	wait_ready etcd "$RUN/etcd.pid" "$RUN/etcd.log" "http://127.0.0.1:$ETCD_PORT/health"

	step "start kube-apiserver"
	local pki="$RUN/pki"
	setsid "$BIN/kube-apiserver" \
		--bind-address=127.0.0.1 \
		--advertise-address=127.0.0.1 \
		--secure-port="$APISERVER_PORT" \
		--cert-dir="$pki" \
		--tls-cert-file="$pki/apiserver.crt" \
		--tls-private-key-file="$pki/apiserver.key" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--service-node-port-range="$NODE_PORT_RANGE" \
		--client-ca-file="$pki/ca.crt" \
		--token-auth-file="$pki/tokens.csv" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$pki/sa.pub" \
		--service-account-signing-key-file="$pki/sa.key" \
		--authorization-mode=Node,RBAC \
		--enable-admission-plugins=NodeRestriction \
		--allow-privileged=true \
		--profiling=false \
		--v=1 \
		</dev/null >"$RUN/kube-apiserver.log" 2>&1 &
	echo $! >"$RUN/kube-apiserver.pid"
	step "wait for kube-apiserver /readyz"
	wait_ready kube-apiserver "$RUN/kube-apiserver.pid" "$RUN/kube-apiserver.log" \
		"https://127.0.0.1:$APISERVER_PORT/readyz" \
		--cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key"

	step "write kubeconfig"
	write_kubeconfig
	cat >"$RUN/env.sh" <<EOF
export KUBECONFIG=$RUN/kubeconfig
export HYPERCLOUD_TEST_KUBECONFIG=$RUN/kubeconfig
EOF

	if [[ -n "${HYPERCLOUD_ENVTEST_OWNER_PID:-}" ]]; then
		step "start watchdog for pid $HYPERCLOUD_ENVTEST_OWNER_PID"
		# The run dir is on the watchdog's command line so `alive` recognises it as ours.
		setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; HYPERCLOUD_ENVTEST_DIR="${2%/}" "$3" stop' \
			envtest-watchdog "$HYPERCLOUD_ENVTEST_OWNER_PID" "$RUN/" "$SCRIPT" \
			</dev/null >>"$RUN/watchdog.log" 2>&1 &
		echo $! >"$RUN/watchdog.pid"
	fi
	log "kube-apiserver ready at https://127.0.0.1:$APISERVER_PORT (logs in $RUN)"
	print_env
}

# stop_one NAME: TERM the recorded process, KILL it after 10s.
stop_one() {
	local pidfile="$RUN/$1.pid" pid i
	if alive "$pidfile"; then
		pid="$(cat "$pidfile")"
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 100); do
			alive "$pidfile" || break
			sleep 0.1
		done
		if alive "$pidfile"; then
			log "$1 (pid $pid) ignored SIGTERM; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		log "stopped $1 (pid $pid)"
	fi
	rm -f "$pidfile"
}

cmd_stop() {
	step "stop kube-apiserver and etcd in $RUN"
	stop_one kube-apiserver
	stop_one etcd
	# Not when the watchdog itself is the one stopping (it is about to exit anyway).
	if [[ "$PPID" != "$(cat "$RUN/watchdog.pid" 2>/dev/null)" ]]; then
		stop_one watchdog
	fi
	rm -rf "$RUN/etcd-data" "$RUN/env.sh"
}

cmd_env() {
	step "read env of the control plane in $RUN"
	alive "$RUN/kube-apiserver.pid" && [[ -f "$RUN/env.sh" ]] || fail "no control plane running in $RUN (run hack/envtest.sh start)"
	print_env
}

case "${1:-}" in
build) cmd_build ;;
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
pin) cmd_pin ;;
build-kubectl) cmd_build_kubectl ;;
*)
	sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
