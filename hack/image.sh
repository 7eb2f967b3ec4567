#!/usr/bin/env bash
# The hypercloud container image as an OCI archive, built without a container daemon (the
# Dockerfile builds the same layout with one). Tool: crane (go-containerregistry, pinned in
# hack/versions.env, built from the Go module proxy into $HYPERCLOUD_CACHE/crane/<version>).
#
#   hack/image.sh build [--out FILE]     release build of hypercloud, its root filesystem, the
#                                        OCI archive (default $HYPERCLOUD_CACHE/image/hypercloud-image.tar)
#                                        and its SBOM beside it (FILE without .tar + .spdx.json);
#                                        prints the archive's path on stdout
#   hack/image.sh verify [FILE]          check an archive: layout, digests, manifest, config
#                                        (user 65532, entrypoint), every personality symlink, and
#                                        run the image's binary under each symlink in a chroot;
#                                        its SBOM lists exactly the crates and runtime packages in it
#   hack/image.sh reproduce [FILE]       build again elsewhere (other umask, tmp dir, file
#                                        times) and require the same image digest as FILE
#   hack/image.sh push FILE REF          push an archive to a registry (crane; docker credentials)
#   hack/image.sh crane                  build crane when missing; print its path
#
# The image: /usr/local/bin/hypercloud (release build of the default features) and one
# symlink per personality beside it (names from `hypercloud --list`), entrypoint hypercloud,
# user 65532:65532 (nonroot). Runtime: a distroless-like base assembled from the build host's
# Debian packages (the glibc loader and the libraries `ldd` names, their copyright files and
# dpkg status in /var/lib/dpkg/status.d for scanners), /etc/passwd and /etc/group with root
# and nonroot, /tmp. No shell. TLS roots are compiled into the binary.
#
# SBOM (SPDX 2.3 JSON, hack/lib/sbom.py): the image (version, digest, commit), every crate the
# binary links as `cargo tree` resolves them for this host (name, version, licence, purl) and the
# Debian runtime packages; as reproducible as the archive.
#
# Reproducible: every time is SOURCE_DATE_EPOCH (default: the commit time of HEAD), layer
# entries are sorted with fixed owners, so the same commit built with the same toolchain and
# host packages gives the same image digest (`reproduce` checks it).
#
# Environment: HYPERCLOUD_CACHE, CARGO_TARGET_DIR (default $HYPERCLOUD_CACHE/target),
# HYPERCLOUD_IMAGE (repository for the image name, default ghcr.io/hypercloud/hypercloud),
# SOURCE_DATE_EPOCH, GOMODCACHE (default $HYPERCLOUD_CACHE/go/mod).
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.env
source "$ROOT/hack/versions.env"
CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
TARGET="${CARGO_TARGET_DIR:-$CACHE/target}"
CRANE="$CACHE/crane/$CRANE_VERSION/crane"
DEFAULT_ARCHIVE="$CACHE/image/hypercloud-image.tar"
REPO="${HYPERCLOUD_IMAGE:-ghcr.io/hypercloud/hypercloud}"
ENTRYPOINT=/usr/local/bin/hypercloud
USER_ID=65532
IMAGE_PATH=/usr/local/bin:/usr/bin:/bin

STEP="setup"
log() { printf 'image: %s\n' "$*" >&2; }
step() { STEP="$1"; log "$1"; }
fail() { printf 'image: step "%s" failed: %s\n' "$STEP" "$*" >&2; exit 1; }
on_err() { printf 'image: step "%s" failed (exit %s at line %s)\n' "$STEP" "$1" "$2" >&2; exit "$1"; }
trap 'on_err $? $LINENO' ERR

WORK=""
REGISTRY_PID=""
cleanup() {
	if [[ -n "$REGISTRY_PID" ]]; then kill "$REGISTRY_PID" 2>/dev/null || true; fi
	if [[ -n "$WORK" ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

# ---------------------------------------------------------------- tools

# need_jq: jq reads and writes the image's JSON; from Debian when missing (and we may).
need_jq() {
	command -v jq >/dev/null && return
	[[ $EUID -eq 0 ]] && command -v apt-get >/dev/null || fail "jq is not installed (apt-get install jq)"
	step "install jq (Debian package)"
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq; } >&2 || fail "apt-get install jq"
}

cmd_crane() {
	if [[ -x "$CRANE" && -f "$CRANE.complete" ]]; then
		echo "$CRANE"
		return
	fi
	step "build crane $CRANE_VERSION"
	command -v go >/dev/null || fail "no go toolchain on PATH (install Go >= 1.24, see README 'Testing: prerequisites')"
	local tmp start version
	mkdir -p "$(dirname "$CRANE")"
	tmp="$(mktemp -d "$(dirname "$CRANE")/.build.XXXXXX")"
	start=$SECONDS
	GOWORK=off GOFLAGS=-mod=mod GOBIN="$tmp" GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}" \
		go install -trimpath -ldflags "-s -w" "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION" ||
		fail "go install github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
	version="$("$tmp/crane" version)"
	[[ "$version" == "$CRANE_VERSION" ]] || fail "crane version says $version, not $CRANE_VERSION"
	mv "$tmp/crane" "$CRANE"
	rmdir "$tmp"
	touch "$CRANE.complete"
	log "built crane in $((SECONDS - start))s: $CRANE"
	echo "$CRANE"
}

# start_registry: an in-memory registry (crane registry serve) on a free loopback port; sets REG.
start_registry() {
	local port i
	for i in $(seq 1 50); do
		port=$((20000 + RANDOM % 12000))
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
		"$CRANE" registry serve --address "127.0.0.1:$port" >"$WORK/registry.log" 2>&1 &
		REGISTRY_PID=$!
		REG="127.0.0.1:$port"
		for i in $(seq 1 50); do
			curl -fsS -o /dev/null "http://$REG/v2/" 2>/dev/null && return 0
			kill -0 "$REGISTRY_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill "$REGISTRY_PID" 2>/dev/null || true
		REGISTRY_PID=""
	done
	fail "no loopback registry could be started (see $WORK/registry.log)"
}

# ---------------------------------------------------------------- build

source_date_epoch() {
	if [[ -n "${SOURCE_DATE_EPOCH:-}" ]]; then
		[[ "$SOURCE_DATE_EPOCH" =~ ^[0-9]+$ ]] || fail "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH is not a number of seconds"
		echo "$SOURCE_DATE_EPOCH"
	else
		git -C "$ROOT" log -1 --format=%ct HEAD || fail "no SOURCE_DATE_EPOCH and no git commit to take it from"
	fi
}

# copy_host PATH: PATH from the host into the root filesystem, with every symlink on the way
# (Debian's merged /usr: /lib64 -> usr/lib64, /usr/lib64/ld-linux-x86-64.so.2 -> ../lib/...).
copy_host() {
	local path prefix="" rest comp link
	path="$(realpath -ms "$1")"
	rest="${path#/}"
	while [[ -n "$rest" ]]; do
		comp="${rest%%/*}"
		if [[ "$rest" == */* ]]; then rest="${rest#*/}"; else rest=""; fi
		prefix="$prefix/$comp"
		if [[ -L "$prefix" ]]; then
			link="$(readlink "$prefix")"
			[[ -L "$ROOTFS$prefix" ]] || ln -s "$link" "$ROOTFS$prefix"
			[[ "$link" == /* ]] || link="$(dirname "$prefix")/$link"
			copy_host "$link${rest:+/$rest}"
			return
		elif [[ -n "$rest" ]]; then
			mkdir -p "$ROOTFS$prefix"
			chmod 0755 "$ROOTFS$prefix"
		else
			[[ -f "$prefix" ]] || fail "$prefix is not a regular file"
			install -m 0755 "$prefix" "$ROOTFS$prefix"
			LIBS+=("$prefix")
		fi
	done
}

# package_of FILE: the Debian package that installed FILE (dpkg knows merged-/usr files under
# either name).
package_of() {
	local f="$1" pkg
	for candidate in "$f" "${f#/usr}" "/usr$f"; do
		pkg="$(dpkg-query -S "$candidate" 2>/dev/null | sed -n '1s/:.*//p')" || true
		[[ -n "$pkg" ]] && { echo "$pkg"; return; }
	done
	fail "no Debian package owns $f (the runtime is assembled from the host's Debian packages)"
}

assemble_rootfs() {
	local bin="$1" line lib interp pkg
	step "assemble the root filesystem"
	command -v dpkg-query >/dev/null || fail "dpkg-query not found: the runtime libraries come from the host's Debian packages"
	mkdir -p "$ROOTFS"/{etc,tmp,home/nonroot,usr/local/bin}
	install -m 0755 "$bin" "$ROOTFS$ENTRYPOINT"
	HYPERCLOUD_BIN="$bin" "$ROOT/hack/install-symlinks.sh" --link-to hypercloud "$ROOTFS/usr/local/bin" >/dev/null
	# The dynamic loader and every library the binary needs, as the host's glibc has them.
	LIBS=()
	interp="$(ldd "$bin" | awk '$1 ~ /^\// && $2 ~ /^\(/ { print $1 }')"
	[[ -n "$interp" ]] || fail "ldd names no dynamic loader for $bin"
	copy_host "$interp"
	while read -r lib; do
		copy_host "$lib"
	done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
	((${#LIBS[@]} >= 2)) || fail "ldd found only ${LIBS[*]} for $bin"
	# Licences and package records (distroless keeps the same, for scanners).
	mkdir -p "$ROOTFS/var/lib/dpkg/status.d"
	for pkg in $(for lib in "${LIBS[@]}"; do package_of "$lib"; done | sort -u); do
		mkdir -p "$ROOTFS/usr/share/doc/$pkg"
		install -m 0644 "/usr/share/doc/$pkg/copyright" "$ROOTFS/usr/share/doc/$pkg/copyright"
		dpkg-query -s "$pkg" | grep -v '^Status:' >"$ROOTFS/var/lib/dpkg/status.d/$pkg"
		PACKAGES+=("$pkg=$(dpkg-query -W -f '${Version}' "$pkg")")
	done
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n' "$USER_ID" "$USER_ID" >"$ROOTFS/etc/passwd"
	printf 'root:x:0:\nnonroot:x:%s:\n' "$USER_ID" >"$ROOTFS/etc/group"
	printf 'hosts: files dns\n' >"$ROOTFS/etc/nsswitch.conf"
	# Modes explicitly, whatever the umask.
	find "$ROOTFS" -type d -exec chmod 0755 {} +
	find "$ROOTFS/etc" "$ROOTFS/var" "$ROOTFS/usr/share" -type f -exec chmod 0644 {} +
	chmod 1777 "$ROOTFS/tmp"
	chmod 0700 "$ROOTFS/home/nonroot"
}

# sbom_of ARCHIVE: where the SBOM of an archive is.
sbom_of() { echo "${1%.tar}.spdx.json"; }

# crate_tree OUT: the crates the release build links (cargo tree of hypercloud's normal
# dependencies for this host, with licences): what the SBOM lists and is checked against.
crate_tree() {
	local host
	host="$(rustc -vV | sed -n 's/^host: //p')"
	(cd "$ROOT" && cargo tree --locked -p hypercloud -e normal --target "$host" --prefix none -f '{p}|{l}') >"$1" ||
		fail "cargo tree"
}

# build_archive OUT: everything after the cargo build; sets DIGEST to the manifest digest.
# (Not in a command substitution: cleanup must see REGISTRY_PID.)
build_archive() {
	local out="$1" bin="$TARGET/release/hypercloud" epoch created version commit tag
	epoch="$(source_date_epoch)"
	created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
	version="$("$bin" --version | awk '{ print $2 }')"
	[[ -n "$version" ]] || fail "$bin --version printed no version"
	tag="v$version"
	commit="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
	ROOTFS="$WORK/rootfs"
	PACKAGES=()
	assemble_rootfs "$bin"

	step "write the layer (SOURCE_DATE_EPOCH=$epoch)"
	python3 "$ROOT/hack/lib/image-layer.py" "$ROOTFS" "$WORK/layer.tar.gz" "$epoch" \
		"home/nonroot=$USER_ID:$USER_ID" || fail "hack/lib/image-layer.py"

	step "assemble the image with crane $CRANE_VERSION (loopback registry)"
	start_registry
	local build="$REG/hypercloud:build" final="$REG/hypercloud:$tag"
	"$CRANE" append --oci-empty-base -f "$WORK/layer.tar.gz" -t "$build" >/dev/null 2>>"$WORK/crane.log" ||
		fail "crane append (see $WORK/crane.log)"
	# crane leaves the creation times at zero; the commit's time instead, as everywhere else.
	"$CRANE" config "$build" |
		jq -c --arg t "$created" '.created = $t | .history = [{created: $t, created_by: "hack/image.sh: hypercloud, personality symlinks, glibc runtime"}]' |
		"$CRANE" edit config "$build" -t "$build" >/dev/null 2>>"$WORK/crane.log" ||
		fail "crane edit config (see $WORK/crane.log)"
	local mutate=(
		--set-platform linux/amd64
		--entrypoint "$ENTRYPOINT"
		--user "$USER_ID:$USER_ID"
		--workdir /
		--env "PATH=$IMAGE_PATH"
		-l "org.opencontainers.image.title=hypercloud"
		-l "org.opencontainers.image.version=$tag"
		-l "org.opencontainers.image.revision=$commit"
		-l "org.opencontainers.image.created=$created"
		-l "org.opencontainers.image.source=https://github.com/hypercloud/hypercloud"
		# Space-separated: crane's -l splits its value at commas (a comma list made a
		# second label per package).
		-l "io.hypercloud.runtime-packages=${PACKAGES[*]}"
		-t "$final"
	)
	"$CRANE" mutate "$build" "${mutate[@]}" >/dev/null 2>>"$WORK/crane.log" || fail "crane mutate (see $WORK/crane.log)"
	rm -rf "$WORK/oci"
	"$CRANE" pull --format=oci "$final" "$WORK/oci" 2>>"$WORK/crane.log" || fail "crane pull --format=oci (see $WORK/crane.log)"
	DIGEST="$("$CRANE" digest "$final")"

	step "write the OCI archive $out"
	# The image's name for `ctr import` (containerd reads io.containerd.image.name) and the tag
	# as the OCI spec has it. index.json is not content-addressed: the digest stays.
	jq -c --arg name "$REPO:$tag" --arg tag "$tag" \
		'.manifests[0].annotations += {"io.containerd.image.name": $name, "org.opencontainers.image.ref.name": $tag}' \
		"$WORK/oci/index.json" >"$WORK/index.json"
	mv "$WORK/index.json" "$WORK/oci/index.json"
	find "$WORK/oci" -type d -exec chmod 0755 {} +
	find "$WORK/oci" -type f -exec chmod 0644 {} +
	mkdir -p "$(dirname "$out")"
	tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=gnu \
		-C "$WORK/oci" -cf "$out.tmp" oci-layout index.json blobs
	mv "$out.tmp" "$out"
	kill "$REGISTRY_PID" 2>/dev/null || true
	REGISTRY_PID=""

	step "write the SBOM $(sbom_of "$out")"
	crate_tree "$WORK/crates.txt"
	python3 "$ROOT/hack/lib/sbom.py" write "$WORK/crates.txt" "$(sbom_of "$out")" \
		--version "$version" --commit "$commit" --created "$created" --digest "$DIGEST" \
		--packages "$(
			IFS=,
			echo "${PACKAGES[*]}"
		)" || fail "hack/lib/sbom.py write"
}

cmd_build() {
	local out="$DEFAULT_ARCHIVE" start
	if [[ "${1:-}" == "--out" && -n "${2:-}" ]]; then
		out="$(realpath -m "$2")"
		shift 2
	fi
	[[ $# -eq 0 ]] || fail "usage: hack/image.sh build [--out FILE]"
	cmd_crane >/dev/null
	need_jq
	step "cargo build --release -p hypercloud"
	start=$SECONDS
	(cd "$ROOT" && CARGO_TARGET_DIR="$TARGET" cargo build --release --locked -p hypercloud) ||
		fail "cargo build --release -p hypercloud"
	log "release build took $((SECONDS - start))s"
	WORK="$(mktemp -d)"
	start=$SECONDS
	build_archive "$out"
	log "image $REPO (digest $DIGEST) in $out, assembled in $((SECONDS - start))s"
	echo "$out"
}

# ---------------------------------------------------------------- verify

# blob DIGEST: path of a blob in the unpacked layout, after checking its content matches.
blob() {
	local digest="$1" file
	[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || fail "bad digest $digest"
	file="$WORK/oci/blobs/sha256/${digest#sha256:}"
	[[ -f "$file" ]] || fail "blob $digest missing from the archive"
	[[ "sha256:$(sha256sum "$file" | cut -d' ' -f1)" == "$digest" ]] || fail "blob $digest does not match its content"
	echo "$file"
}

expect() { # expect WHAT GOT WANT
	[[ "$2" == "$3" ]] || fail "$1 is '$2', expected '$3'"
	log "ok: $1 = $2"
}

# run_in_image ARGS...: the image's binary in a chroot of the exported filesystem, as nonroot
# (as root: chroot --userspec; else inside a user namespace).
run_in_image() {
	if [[ $EUID -eq 0 ]]; then
		chroot --userspec="$USER_ID:$USER_ID" "$WORK/fs" "$@"
	else
		unshare --map-root-user chroot "$WORK/fs" "$@"
	fi
}

cmd_verify() {
	local archive="${1:-$DEFAULT_ARCHIVE}" manifest config layer size digest
	[[ -f "$archive" ]] || fail "no archive at $archive (hack/image.sh build first)"
	cmd_crane >/dev/null
	need_jq
	WORK="$(mktemp -d)"
	mkdir -p "$WORK/oci" "$WORK/fs"
	step "unpack $archive"
	tar -xf "$archive" -C "$WORK/oci"

	step "check the OCI layout and every digest"
	expect "oci-layout version" "$(jq -r .imageLayoutVersion "$WORK/oci/oci-layout")" "1.0.0"
	expect "manifests in index.json" "$(jq '.manifests | length' "$WORK/oci/index.json")" "1"
	expect "manifest media type" "$(jq -r '.manifests[0].mediaType' "$WORK/oci/index.json")" "application/vnd.oci.image.manifest.v1+json"
	digest="$(jq -r '.manifests[0].digest' "$WORK/oci/index.json")"
	manifest="$(blob "$digest")"
	expect "manifest size" "$(stat -c %s "$manifest")" "$(jq -r '.manifests[0].size' "$WORK/oci/index.json")"
	local name
	name="$(jq -r '.manifests[0].annotations["io.containerd.image.name"]' "$WORK/oci/index.json")"
	[[ "$name" == *:v* ]] || fail "index.json names the image '$name', not REPO:vVERSION"
	log "ok: image name $name"
	config="$(blob "$(jq -r .config.digest "$manifest")")"
	expect "config size" "$(stat -c %s "$config")" "$(jq -r .config.size "$manifest")"
	expect "config media type" "$(jq -r .config.mediaType "$manifest")" "application/vnd.oci.image.config.v1+json"
	expect "layers" "$(jq '.layers | length' "$manifest")" "1"
	layer="$(blob "$(jq -r '.layers[0].digest' "$manifest")")"
	size="$(jq -r '.layers[0].size' "$manifest")"
	expect "layer size" "$(stat -c %s "$layer")" "$size"
	expect "layer diff_id" "sha256:$(gzip -dc "$layer" | sha256sum | cut -d' ' -f1)" "$(jq -r '.rootfs.diff_ids[0]' "$config")"

	step "check the image config (and that the Dockerfile says the same)"
	grep -qxF "USER $USER_ID:$USER_ID" "$ROOT/Dockerfile" || fail "Dockerfile has no 'USER $USER_ID:$USER_ID'"
	grep -qxF "ENTRYPOINT [\"$ENTRYPOINT\"]" "$ROOT/Dockerfile" || fail "Dockerfile has another ENTRYPOINT than $ENTRYPOINT"
	grep -qF "install-symlinks.sh --link-to hypercloud /out$(dirname "$ENTRYPOINT")" "$ROOT/Dockerfile" ||
		fail "Dockerfile does not make the symlinks with hack/install-symlinks.sh --link-to hypercloud"
	expect "os/architecture" "$(jq -r '.os + "/" + .architecture' "$config")" "linux/amd64"
	expect "user" "$(jq -r .config.User "$config")" "$USER_ID:$USER_ID"
	expect "entrypoint" "$(jq -c .config.Entrypoint "$config")" "[\"$ENTRYPOINT\"]"
	expect "env" "$(jq -c .config.Env "$config")" "[\"PATH=$IMAGE_PATH\"]"
	expect "created" "$(jq -r .created "$config")" "$(jq -r '.config.Labels["org.opencontainers.image.created"]' "$config")"
	[[ "$(jq -r .created "$config")" != 0001-* ]] || fail "config has no creation time"

	step "check the layer's entries (owners, modes, times)"
	local listing
	listing="$(tar -tvzf "$layer")"
	! grep -vE '^\S+ 0/0 |^drwx------ 65532/65532 .* home/nonroot/?$' <<<"$listing" ||
		fail "entries not owned by 0/0 (only home/nonroot is 65532's)"
	expect "distinct entry times" "$(tar --full-time -tvzf "$layer" | awk '{ print $4 " " $5 }' | sort -u | wc -l)" "1"
	expect "entries sorted" "$(tar -tzf "$layer" | LC_ALL=C sort -c && echo yes)" "yes"

	step "push to a loopback registry and export the filesystem (crane)"
	start_registry
	"$CRANE" push "$WORK/oci" "$REG/hypercloud:verify" >/dev/null 2>"$WORK/crane.log" || fail "crane push (see $WORK/crane.log)"
	expect "digest the registry computed" "$("$CRANE" digest "$REG/hypercloud:verify")" "$digest"
	"$CRANE" export "$REG/hypercloud:verify" - | tar -x -C "$WORK/fs" --no-same-owner
	kill "$REGISTRY_PID" 2>/dev/null || true
	REGISTRY_PID=""

	step "check the personality symlinks"
	local names=() n out version
	[[ -x "$WORK/fs$ENTRYPOINT" && ! -L "$WORK/fs$ENTRYPOINT" ]] || fail "$ENTRYPOINT is not an executable file"
	grep -q "^nonroot:x:$USER_ID:$USER_ID:" "$WORK/fs/etc/passwd" || fail "/etc/passwd has no nonroot user $USER_ID"
	# The names the image's own binary knows, run inside the image (so also: it starts there).
	# (`--list` prints `NAME` or `NAME (alias: A,B)` per line, as hack/install-symlinks.sh reads it.)
	mapfile -t names < <(run_in_image "$ENTRYPOINT" --list | sed -e 's/(alias: //' -e 's/)//' -e 's/,/ /g' | tr -s ' ' '\n' | grep .)
	((${#names[@]} >= 5)) || fail "hypercloud --list in the image named only: ${names[*]}"
	for n in "${names[@]}"; do
		[[ -L "$WORK/fs/usr/local/bin/$n" ]] || fail "/usr/local/bin/$n is missing or not a symlink"
		expect "/usr/local/bin/$n ->" "$(readlink "$WORK/fs/usr/local/bin/$n")" "hypercloud"
	done
	expect "entries in /usr/local/bin" "$(find "$WORK/fs/usr/local/bin" -mindepth 1 | wc -l)" "$((${#names[@]} + 1))"

	step "run the image's binary under each personality symlink (chroot, user $USER_ID)"
	version="$(run_in_image "$ENTRYPOINT" --version)" || fail "hypercloud --version in the image"
	for n in "${names[@]}"; do
		out="$(run_in_image "/usr/local/bin/$n" --version 2>&1)" || fail "/usr/local/bin/$n --version: $out"
		expect "$n --version" "$out" "$n ${version#hypercloud }"
		out="$(run_in_image "/usr/local/bin/$n" --help 2>&1)" || fail "/usr/local/bin/$n --help: $out"
		grep -q "^Usage: $n " <<<"$out" || fail "/usr/local/bin/$n --help does not describe $n: $(head -3 <<<"$out")"
		log "ok: $n --help"
	done
	local rc=0
	run_in_image /usr/local/bin/cloud-controller-manager --no-such-flag >/dev/null 2>&1 || rc=$?
	expect "exit code of cloud-controller-manager --no-such-flag" "$rc" "2"

	step "check the runtime packages label against the image's dpkg records"
	local labelled recorded
	labelled="$(jq -r '.config.Labels["io.hypercloud.runtime-packages"]' "$config" | tr ' ' '\n' | sed 's/=.*//' | sort | xargs)"
	recorded="$(find "$WORK/fs/var/lib/dpkg/status.d" -type f -printf '%f\n' | sort | xargs)"
	expect "packages in the io.hypercloud.runtime-packages label" "$labelled" "$recorded"
	expect "labels not ours or OCI's" "$(jq -r '.config.Labels | keys[] | select(startswith("org.opencontainers.") or startswith("io.hypercloud.") | not)' "$config" | xargs)" ""

	step "check the SBOM $(sbom_of "$archive")"
	[[ -f "$(sbom_of "$archive")" ]] || fail "no SBOM beside the archive (hack/image.sh build writes it)"
	crate_tree "$WORK/crates.txt"
	python3 "$ROOT/hack/lib/sbom.py" check "$(sbom_of "$archive")" "$WORK/crates.txt" \
		--version "${version#hypercloud }" --digest "$digest" \
		--packages "$(jq -r '.config.Labels["io.hypercloud.runtime-packages"]' "$config")" >&2 ||
		fail "hack/lib/sbom.py check"
	log "image $name ($digest) verified"
}

cmd_reproduce() {
	local archive="${1:-$DEFAULT_ARCHIVE}" want
	[[ -f "$archive" ]] || fail "no archive at $archive (hack/image.sh build first)"
	[[ -x "$TARGET/release/hypercloud" ]] || fail "no release build in $TARGET (hack/image.sh build first)"
	need_jq
	want="$(tar -xOf "$archive" index.json | jq -r '.manifests[0].digest')"
	cmd_crane >/dev/null
	# Another work dir, umask and file times than the first build.
	WORK="$(mktemp -d "${TMPDIR:-/tmp}/hypercloud-image-again.XXXXXX")"
	umask 0002
	touch "$TARGET/release/hypercloud"
	build_archive "$WORK/again.tar"
	expect "image digest of a second build" "$DIGEST" "$want"
	cmp -s "$archive" "$WORK/again.tar" || fail "the archives differ although the image digest is the same"
	log "ok: the archive is byte for byte the same"
	cmp -s "$(sbom_of "$archive")" "$(sbom_of "$WORK/again.tar")" || fail "the SBOMs differ"
	log "ok: the SBOM is byte for byte the same"
}

cmd_push() {
	local archive="${1:-}" ref="${2:-}"
	[[ -f "$archive" && -n "$ref" ]] || fail "usage: hack/image.sh push FILE REF"
	cmd_crane >/dev/null
	WORK="$(mktemp -d)"
	mkdir -p "$WORK/oci"
	tar -xf "$archive" -C "$WORK/oci"
	"$CRANE" push "$WORK/oci" "$ref"
}

case "${1:-}" in
build) shift; cmd_build "$@" ;;
verify) shift; cmd_verify "$@" ;;
reproduce) shift; cmd_reproduce "$@" ;;
push) shift; cmd_push "$@" ;;
crane) cmd_crane ;;
*)
	sed -n '2,/^set -Eeuo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
