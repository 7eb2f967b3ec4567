#!/usr/bin/env bash
# Fails when the committed cloud-call diagrams (docs/diagrams/, and their copies embedded in
# docs/cloud-call-traces.md and docs/guide/in-tree-and-external.md) differ from what the demo records now: runs
# hack/update-diagrams.sh into a temp dir and diffs. Fix with hack/update-diagrams.sh.
#
#   hack/verify-diagrams.sh [--from DIR]   --from: the traces of earlier local-up runs in
#                                          DIR/{in-tree,external} (hack/compare-modes.sh --dir DIR)
set -euo pipefail
cd "$(dirname "$0")/.."

tmp="$(mktemp -d "${TMPDIR:-/tmp}/hypercloud-verify-diagrams.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
hack/update-diagrams.sh --root "$tmp" "$@"

stale=false
# Only the diagrams update-diagrams.sh writes (the local cloud's demo); the per-cloud pages'
# diagrams (vsphere-*, aws-*) are rendered by hand from their compare-modes traces.
for f in in-tree.mmd in-tree.svg external.mmd external.svg \
  volumes-in-tree.mmd volumes-in-tree.svg volumes-external.mmd volumes-external.svg; do
  diff -uN "docs/diagrams/$f" "$tmp/docs/diagrams/$f" || stale=true
done
for doc in docs/cloud-call-traces.md docs/guide/in-tree-and-external.md; do
  diff -u "$doc" "$tmp/$doc" || stale=true
done
if $stale; then
  echo "verify-diagrams: the committed diagrams are stale (diff above: committed -> now)." >&2
  echo "verify-diagrams: regenerate with hack/update-diagrams.sh, review the diff and commit it." >&2
  exit 1
fi
echo "verify-diagrams: docs/diagrams, docs/cloud-call-traces.md and docs/guide/in-tree-and-external.md are up to date"
