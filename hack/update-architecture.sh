#!/usr/bin/env bash
# Regenerates the crate graph in docs/architecture.md (between the "crate-graph" markers) from
# the workspace's Cargo.toml files (`cargo metadata`): normal dependencies between workspace
# crates; dev-dependencies (pkg/testenv in tests) are left out. hack/verify-architecture.sh
# checks it is current.
#
#   hack/update-architecture.sh [--root DIR]   write DIR/docs/architecture.md instead
set -euo pipefail
cd "$(dirname "$0")/.."

root=.
if [ "${1:-}" = "--root" ]; then
  root="$2"
  mkdir -p "$root/docs"
  [ "$root" = . ] || cp docs/architecture.md "$root/docs/architecture.md"
fi

cargo metadata --no-deps --format-version 1 |
  python3 -c '
import json, sys, pathlib
meta = json.load(sys.stdin)
root = pathlib.Path(meta["workspace_root"])
crates = {p["name"]: p for p in meta["packages"]}
def short(name):
    return "hypercloud" if name == "hypercloud" else name.removeprefix("hypercloud-").replace("-", "_")
lines = ["```mermaid", "graph TD"]
for name in sorted(crates, key=lambda n: (n != "hypercloud", n)):
    p = crates[name]
    path = pathlib.Path(p["manifest_path"]).parent.relative_to(root)
    lines.append(f"  {short(name)}[\"{name}<br/>{path}\"]")
for name in sorted(crates, key=lambda n: (n != "hypercloud", n)):
    deps = sorted({d["name"] for d in crates[name]["dependencies"]
                   if d["name"] in crates and d.get("kind") is None})
    for d in deps:
        lines.append(f"  {short(name)} --> {short(d)}")
lines.append("```")
doc = pathlib.Path(sys.argv[1]).read_text()
begin, end = "<!-- crate-graph: begin (hack/update-architecture.sh) -->", "<!-- crate-graph: end -->"
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
pathlib.Path(sys.argv[1]).write_text(head + begin + "\n" + "\n".join(lines) + "\n" + end + tail)
' "$root/docs/architecture.md"
