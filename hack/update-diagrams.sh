#!/usr/bin/env bash
# Regenerates the cloud-call sequence diagrams from a real run of the demo in both modes:
#
#   hack/local-up.sh --smoke --mode in-tree|external   every personality records its provider
#                                                      calls (--trace-cloud-calls)
#   hypercloud trace render                            normalises and draws them
#
# and writes docs/diagrams/{in-tree,external}.{mmd,svg}, the volume path alone (the volume
# calls of the same traces; clouds whose demo has a volume step, hack/lib/volume-demo.sh) in
# docs/diagrams/volumes-{in-tree,external}.{mmd,svg}, plus the
# Mermaid copies embedded in docs/cloud-call-traces.md and docs/guide/in-tree-and-external.md
# (between their BEGIN/END GENERATED markers). Review the diff and
# commit it; hack/verify-diagrams.sh fails while the committed files are stale.
#
#   hack/update-diagrams.sh [--cloud NAME] [--root DIR] [--from DIR]
#     --cloud NAME the demo of hack/local-up.sh --cloud NAME (default local): another cloud's
#                  diagrams are docs/diagrams/NAME-{in-tree,external,volumes-in-tree,
#                  volumes-external}.{mmd,svg}, embedded in
#                  its guide page docs/guide/NAME.md where that has BEGIN/END GENERATED markers
#     --root DIR   write DIR/docs/... instead of this checkout's docs/ (hack/verify-diagrams.sh
#                  uses a temp dir)
#     --from DIR   render the traces of earlier runs in DIR/in-tree and DIR/external (as
#                  hack/compare-modes.sh --dir DIR leaves them) instead of running local-up
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
export HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HYPERCLOUD_CACHE/target}"

root="$repo" from="" cloud=local
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="${2:-}"; shift 2 ;;
    --root=*) root="${1#--root=}"; shift ;;
    --from) from="${2:-}"; shift 2 ;;
    --from=*) from="${1#--from=}"; shift ;;
    --cloud) cloud="${2:-}"; shift 2 ;;
    --cloud=*) cloud="${1#--cloud=}"; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "update-diagrams: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$root" ] || { echo "update-diagrams: --root needs a directory" >&2; exit 2; }

case "$cloud" in
  local) docs=(docs/cloud-call-traces.md docs/guide/in-tree-and-external.md) prefix="" title_prefix="" up_args=() ;;
  [a-z]*) docs=("docs/guide/$cloud.md") prefix="$cloud-" title_prefix="$cloud, " up_args=(--cloud "$cloud") ;;
  *) echo "update-diagrams: bad --cloud '$cloud'" >&2; exit 2 ;;
esac
[ -e "hack/lib/cloud-$cloud.sh" ] || [ "$cloud" = local ] || { echo "update-diagrams: no cloud $cloud (hack/lib/cloud-$cloud.sh)" >&2; exit 2; }
scratch="$(mktemp -d "${TMPDIR:-/tmp}/hypercloud-diagrams.XXXXXX")"
finish() {
  local rc=$?
  if [ "$rc" -eq 0 ]; then rm -rf "$scratch"; else echo "update-diagrams: traces and logs kept in $scratch" >&2; fi
  exit "$rc"
}
trap finish EXIT
fail() { echo "update-diagrams: FAILED: $*" >&2; exit 1; }

# HYPERCLOUD_BIN: a binary already built (hack/test.sh passes the one its `cargo test` made;
# `cargo build -p hypercloud` resolves features apart from the workspace and would compile the
# AWS SDK crates again, minutes for nothing).
if [ -n "${HYPERCLOUD_BIN:-}" ]; then
  bin="$HYPERCLOUD_BIN"
  [ -x "$bin" ] || fail "HYPERCLOUD_BIN=$bin is not an executable"
else
  cargo build -p hypercloud --quiet
  bin="$CARGO_TARGET_DIR/debug/hypercloud"
fi
mkdir -p "$root/docs/diagrams"

# shellcheck source=hack/lib/cloud-modes.sh
source hack/lib/cloud-modes.sh
for mode in $(cloud_modes "$cloud"); do
  if [ -n "$from" ]; then
    run="$from/$mode"
    echo "update-diagrams: the traces of the earlier --mode $mode run in $run"
  else
    run="$scratch/$mode"
    echo "update-diagrams: hack/local-up.sh ${up_args[*]} --smoke --mode $mode (log: $scratch/local-up-$mode.log)"
    hack/local-up.sh "${up_args[@]}" --smoke --mode "$mode" --dir "$run" >"$scratch/local-up-$mode.log" 2>&1 \
      || { tail -n 30 "$scratch/local-up-$mode.log" >&2; fail "hack/local-up.sh ${up_args[*]} --smoke --mode $mode"; }
  fi
  traces=("$run"/trace-*.jsonl)
  [ -e "${traces[0]}" ] || fail "local-up --mode $mode wrote no trace-*.jsonl"
  # kubelet-helper is always a participant: with --cloud-provider=external it makes no cloud
  # call and writes no trace, which is the point of the external layout.
  for format in mermaid svg; do
    ext=mmd; [ "$format" = svg ] && ext=svg
    "$bin" trace render --format "$format" --participant kubelet-helper \
      --title "$title_prefix$mode mode: hack/local-up.sh ${up_args[*]}${up_args[*]:+ }--smoke --mode $mode" \
      -o "$root/docs/diagrams/$prefix$mode.$ext" "${traces[@]}"
  done
  echo "update-diagrams: wrote $root/docs/diagrams/$prefix$mode.mmd and .svg"

  # The volume path alone (local-up's volume step, hack/lib/volume-demo.sh, for the clouds
  # that have one): the calls that create, grow, delete, attach and detach cloud volumes, find
  # attached disks or label PVs. External, the CCM's PV label controller and (the local cloud) the
  # csi-driver's provisioning and attaching for the CSI sidecars.
  grep -q "^${cloud}_volume_class()" hack/lib/volume-demo.sh "hack/lib/cloud-$cloud.sh" 2>/dev/null || continue
  vol="$scratch/volumes-$mode"
  mkdir -p "$vol"
  python3 - "$vol" "${traces[@]}" <<'EOF'
import json, os, sys
methods = {"create_volume", "delete_volume", "expand_volume", "get_labels_for_volume",
           "attach_disk", "detach_disk", "disk_is_attached", "disks_are_attached",
           "get_attachment_disk_path"}
for path in sys.argv[2:]:
    with open(path) as f, open(os.path.join(sys.argv[1], os.path.basename(path)), "w") as out:
        for line in f:
            if line.strip() and json.loads(line).get("method") in methods:
                out.write(line)
EOF
  if [ "$mode" = in-tree ] && grep -q "^${cloud}_volume_pv()" "hack/lib/cloud-$cloud.sh" 2>/dev/null; then
    # A cloud that cannot provision: the volume step attaches an existing volume's PV.
    title="${title_prefix}volumes, in-tree mode: hack/local-up.sh ${up_args[*]}${up_args[*]:+ }--smoke --mode in-tree (an existing volume's PV: attach, wait for the disk)"
    who=(--participant kubelet-helper --participant kube-controller-manager)
  elif [ "$mode" = in-tree ]; then
    title="${title_prefix}volumes, in-tree mode: hack/local-up.sh ${up_args[*]}${up_args[*]:+ }--smoke --mode in-tree (provision, label, attach, wait for the disk)"
    who=(--participant kubelet-helper --participant kube-controller-manager)
  else
    title="${title_prefix}volumes, external mode: hack/local-up.sh ${up_args[*]}${up_args[*]:+ }--smoke --mode external (provisioning and attach: a CSI driver's job)"
    who=(--participant kubelet-helper --participant cloud-controller-manager)
  fi
  for format in mermaid svg; do
    ext=mmd; [ "$format" = svg ] && ext=svg
    "$bin" trace render --format "$format" "${who[@]}" --title "$title" \
      -o "$root/docs/diagrams/${prefix}volumes-$mode.$ext" "$vol"/trace-*.jsonl
  done
  echo "update-diagrams: wrote $root/docs/diagrams/${prefix}volumes-$mode.mmd and .svg"
done

# Embed the Mermaid text in the docs, so it renders where people read it (paths in the
# markers are relative to docs/).
for doc in "${docs[@]}"; do
  awk -v dir="$root/docs" '
    /^<!-- BEGIN GENERATED: / {
      print
      file = $0
      sub(/^<!-- BEGIN GENERATED: /, "", file)
      sub(/ .*/, "", file)
      print "```mermaid"
      while ((got = (getline line < (dir "/" file))) > 0) print line
      if (got < 0) { print "update-diagrams: " dir "/" file ": cannot read" > "/dev/stderr"; exit 1 }
      close(dir "/" file)
      print "```"
      skipping = 1
      next
    }
    /^<!-- END GENERATED -->/ { skipping = 0 }
    !skipping { print }
    END { if (skipping) { print "update-diagrams: BEGIN GENERATED without END GENERATED" > "/dev/stderr"; exit 1 } }
  ' "$repo/$doc" >"$scratch/doc.md" || fail "embedding the diagrams in $doc"
  mkdir -p "$(dirname "$root/$doc")"
  cp "$scratch/doc.md" "$root/$doc"
  echo "update-diagrams: wrote $root/$doc"
done
