#!/usr/bin/env bash
# Fails when the committed cloud-call diagrams (docs/diagrams/, and their copies embedded in
# docs/cloud-call-traces.md and docs/guide/in-tree-and-external.md, or the cloud's guide page)
# differ from what the demo records now: runs hack/update-diagrams.sh into a temp dir and diffs.
# Fix with hack/update-diagrams.sh.
#
#   hack/verify-diagrams.sh [--cloud NAME] [--from DIR]
#     --cloud NAME  the diagrams of hack/local-up.sh --cloud NAME (default local):
#                   docs/diagrams/NAME-{,volumes-}{in-tree,external}.{mmd,svg} and docs/guide/NAME.md
#     --from DIR    the traces of earlier local-up runs in DIR/{in-tree,external}
#                   (hack/compare-modes.sh --dir DIR)
set -euo pipefail
cd "$(dirname "$0")/.."

cloud=local
args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --cloud) cloud="${2:-}"; shift 2 ;;
    --cloud=*) cloud="${1#--cloud=}"; shift ;;
    *) shift ;;
  esac
done
if [ "$cloud" = local ]; then
  prefix="" docs=(docs/cloud-call-traces.md docs/guide/in-tree-and-external.md)
else
  prefix="$cloud-" docs=("docs/guide/$cloud.md")
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/hypercloud-verify-diagrams.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
hack/update-diagrams.sh --root "$tmp" "${args[@]}"

stale=false
# The diagrams update-diagrams.sh writes for this cloud (the volume path alone only for the
# clouds whose demo has a volume step: a file on neither side is no difference).
files=(in-tree.mmd in-tree.svg external.mmd external.svg
  volumes-in-tree.mmd volumes-in-tree.svg volumes-external.mmd volumes-external.svg)
for f in "${files[@]}"; do
  # A layout the cloud's demo does not run (hack/lib/cloud-modes.sh) has no file on either side.
  [ -e "docs/diagrams/$prefix$f" ] || [ -e "$tmp/docs/diagrams/$prefix$f" ] || continue
  diff -uN "docs/diagrams/$prefix$f" "$tmp/docs/diagrams/$prefix$f" || stale=true
done
for doc in "${docs[@]}"; do
  diff -u "$doc" "$tmp/$doc" || stale=true
done
if $stale; then
  echo "verify-diagrams: the committed diagrams are stale (diff above: committed -> now)." >&2
  echo "verify-diagrams: regenerate with hack/update-diagrams.sh ${args[*]}, review the diff and commit it." >&2
  exit 1
fi
echo "verify-diagrams: docs/diagrams/${prefix}* and ${docs[*]} are up to date"
