#!/usr/bin/env python3
"""Checks that the lists in the docs and the README match what the code defines, and that
every repository path the docs name exists (hack/verify-docs.sh runs it; no build needed).

    python3 hack/lib/verify_docs.py [--root DIR]

Checked here (each list against the one place in the code that defines it):
- personalities: every table headed "| personality |" in README.md and
  docs/guide/personalities.md lists, in order, the names and aliases of
  cmd/hypercloud/src/personality.rs `TABLE`;
- crates: the README's "Layout" block names every workspace member of Cargo.toml;
- openstack cloud.conf keys: docs/openstack-provider.md's "Every documented key" table puts
  each key of pkg/providers/openstack/src/config.rs `DOCUMENTED_KEYS` in the row of its
  treatment, and names no key that list does not have;
- paths: every repository path in backticks or in a relative link of DOCS exists (a glob must
  match something; a path with a placeholder such as `<cloud>` is not checked), and every bare
  `name.rs` there is the end of some file's path under cmd/ or pkg/;
- flags: each flag the tables of docs/guide/personalities.md name exists (the controller
  managers' against their golden --help in cmd/hypercloud/tests/golden/, the others among the
  flags clap derives from the code);
- hack/: the code map's hack/ table names every script directly under hack/ and hack/bench/;
- names: every function, module, constant or type the code map (docs/architecture.md) names
  with an underscore (`initialisation_patch`, `pv_label::check`) is defined under cmd/ or pkg/ (or in hack/lib/*.py).
The controller tables (names, aliases, which component runs which) are checked by the unit
test `docs_list_every_controller` in pkg/controllers/src/names.rs instead, beside the code, and
each cloud's load balancer settings table (docs/guide/aws.md, docs/guide/gce.md,
docs/openstack-provider.md; generated from the provider's `SERVICE_SETTINGS`) by the provider's
unit test `lb_settings_doc` (pkg/cloudprovider/src/lb_settings.rs `verify_doc`).
Prints one line per difference and exits 1 if there is any.
"""

import glob
import pathlib
import re
import sys

# The docs whose paths are checked.
DOCS = [
    "README.md",
    "docs/architecture.md",
    "docs/controller-manager-runtime.md",
    "docs/openstack-provider.md",
    "docs/guide/in-tree-and-external.md",
    "docs/guide/personalities.md",
]

# Paths the code map may name before they exist (a move in flight on another branch); empty on
# main. A listed path that exists is reported, so an entry cannot outlive its reason.
NOT_YET: list[str] = []

# Paths in upstream's repositories that the docs name (besides Go files, which are never ours).
UPSTREAM = [
    "cmd/cloud-controller-manager",  # k8s.io/kubernetes' example cloud-controller-manager
]

PATH_PREFIXES = ("cmd/", "pkg/", "hack/", "deploy/", "docs/", ".ci/")


def table_rows(text, header_prefix):
    """The rows (lists of stripped cells) of every table whose header starts so."""
    tables = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header_prefix):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            tables.append(rows)
    return tables


def ticked(cell):
    return cell.split("`")[1::2]


def check_personalities(root, errors):
    src = (root / "cmd/hypercloud/src/personality.rs").read_text()
    table = src[src.index("pub const TABLE"):]
    table = table[:table.index("];")]
    want = [
        [name] + re.findall(r'"([^"]+)"', aliases)
        for name, aliases in re.findall(r'Personality::\w+,\s*"([^"]+)",\s*&\[([^\]]*)\]', table)
    ]
    if not want:
        errors.append("personality.rs: TABLE not found (the check needs updating)")
        return
    for doc in ("README.md", "docs/guide/personalities.md"):
        tables = table_rows((root / doc).read_text(), "| personality |")
        if not tables:
            errors.append(f"{doc}: no table headed '| personality |'")
        for rows in tables:
            got = [ticked(r[0]) for r in rows]
            if got != want:
                errors.append(
                    f"{doc}: personality table lists {got}, "
                    f"cmd/hypercloud/src/personality.rs TABLE has {want}"
                )


def check_crates(root, errors):
    manifest = (root / "Cargo.toml").read_text()
    members_block = re.search(r"members\s*=\s*\[(.*?)\]", manifest, re.S)
    members = re.findall(r'"([^"]+)"', members_block.group(1)) if members_block else []
    readme = (root / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    layout = layout[layout.index("```") + 3:]
    layout = layout[:layout.index("```")]
    listed = {line.split()[0].rstrip("/") for line in layout.splitlines() if line.strip() and not line.startswith(" ")}
    for m in members:
        if m.rstrip("/") not in listed:
            errors.append(f"README.md: the Layout block does not name the workspace member {m}")
    for path in listed:
        if not (root / path).exists():
            errors.append(f"README.md: the Layout block names {path}, which does not exist")


def check_openstack_keys(root, errors):
    src = (root / "pkg/providers/openstack/src/config.rs").read_text()
    block = src[src.index("pub const DOCUMENTED_KEYS"):]
    block = block[:block.index("};")]
    code = re.findall(r'\(\s*"(\w+)",\s*"([\w-]+)",\s*"[^"]*",\s*(\w+),?\s*\)', block)
    if not code:
        errors.append("config.rs: DOCUMENTED_KEYS not found (the check needs updating)")
        return
    doc = (root / "docs/openstack-provider.md").read_text()
    doc = doc[doc.index("### Every documented key"):]
    rows = table_rows(doc, "| treatment | keys |")
    if not rows:
        errors.append("docs/openstack-provider.md: no '| treatment | keys |' table")
        return
    treatment = {"implemented": "Implemented", "warning": "Warned", "error": "Rejected"}
    documented = set()
    for cells in rows[0]:
        t = treatment.get(cells[0].split()[0])
        if t is None:
            errors.append(f"docs/openstack-provider.md: unknown treatment {cells[0]!r}")
            continue
        section = None
        # A word right after "(" or "than" is a value or a comment ("`enabled` (`false`: ...)",
        # "`lb-version` other than `v2`"), not a key.
        words = [
            m.group(1)
            for m in re.finditer(r"`([^`]*)`", cells[1])
            if not re.search(r"(\(|than )$", cells[1][: m.start()])
        ]
        for word in words:
            m = re.match(r'\[(\w+)(?: "[^"]*")?\]\s*(.*)', word)
            if m:
                section, word = m.group(1), m.group(2)
            key = word.split("=")[0].strip()
            if section and re.fullmatch(r"[a-z][a-z0-9-]*", key):
                documented.add((section, key, t))
    code_keys = {(s, k) for s, k, _ in code}
    for s, k, t in code:
        if s == "Global" and t == "Implemented":
            continue  # the table says "`[Global]` all but those below"
        if (s, k, t) not in documented:
            errors.append(
                f"docs/openstack-provider.md: [{s}] {k} is {t} in config.rs DOCUMENTED_KEYS "
                "but not in that row of 'Every documented key'"
            )
    for s, k, t in sorted(documented):
        if (s, k) not in code_keys:
            errors.append(
                f"docs/openstack-provider.md: 'Every documented key' names [{s}] {k}, "
                "which config.rs DOCUMENTED_KEYS does not have"
            )


def candidate_paths(text):
    """Repository paths in backticks and relative link targets, with their line numbers."""
    for n, line in enumerate(text.splitlines(), 1):
        for word in line.split("`")[1::2]:
            word = word.split()[0] if word.split() else ""
            if word.startswith(PATH_PREFIXES):
                yield n, word, "root"
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if not re.match(r"[a-z]+:", target) and not target.startswith("#"):
                yield n, target.split("#")[0], "doc"


def source_files(root):
    """Every file under the crates' and the binary's directories, as repository paths."""
    files = set()
    for top in ("cmd", "pkg"):
        for f in (root / top).rglob("*"):
            if f.is_file() and "target" not in f.parts:
                files.add(f.relative_to(root).as_posix())
    return files


def check_paths(root, errors):
    not_yet = {p.rstrip("/") for p in NOT_YET}
    files = source_files(root)
    # A bare file name (`cloud_node.rs`, `loadbalancer/security_group.rs`) must be some crate's.
    for doc in DOCS:
        for n, line in enumerate((root / doc).read_text().splitlines(), 1):
            for word in line.split("`")[1::2]:
                word = word.split()[0] if word.split() else ""
                if re.fullmatch(r"[\w/]+\.rs", word) and not word.startswith(PATH_PREFIXES):
                    if not any(f == word or f.endswith("/" + word) for f in files):
                        errors.append(f"{doc}:{n}: no crate has a file {word}")
    for p in sorted(not_yet):
        if (root / p).exists():
            errors.append(f"verify_docs.py: {p} exists now; take it off NOT_YET")
    for doc in DOCS:
        text = (root / doc).read_text()
        for n, path, base in candidate_paths(text):
            if not path or re.search(r"[<>{}]|NAME|\.\.\.$", path):
                continue
            if path.endswith(".go") or path.rstrip("/") in UPSTREAM:
                continue
            path = path.rstrip(".,:;")
            full = (root / path) if base == "root" else ((root / doc).parent / path)
            rel = full.resolve().relative_to(root.resolve()).as_posix() if full.resolve().is_relative_to(root.resolve()) else str(full)
            if rel.rstrip("/") in not_yet:
                continue
            if any(c in path for c in "*?["):
                if not glob.glob(str(full)):
                    errors.append(f"{doc}:{n}: {path} matches no file")
            elif not full.exists():
                errors.append(f"{doc}:{n}: {path} does not exist")


def check_names(root, errors):
    """Every function, module or constant named with an underscore in the code map exists."""
    defined = set()
    for top in ("cmd", "pkg"):
        for f in (root / top).rglob("*.rs"):
            if "target" in f.parts:
                continue
            defined.add(f.stem)
            defined.update(re.findall(r"\b(?:fn|mod|const|static|struct|enum|trait)\s+(\w+)", f.read_text()))
    for f in (root / "hack/lib").glob("*.py"):
        defined.update(re.findall(r"^(?:def\s+)?(\w+)", f.read_text(), re.M))
    doc = "docs/architecture.md"
    for n, line in enumerate((root / doc).read_text().splitlines(), 1):
        for word in line.split("`")[1::2]:
            word = re.sub(r"\(.*", "", word)
            if not re.fullmatch(r"[A-Za-z_][\w]*(::\w+)*", word) or "_" not in word.split("::")[-1]:
                continue
            if word.startswith(("hypercloud_",)) and "::" not in word:
                continue  # a crate's name
            if word.split("::")[-1] not in defined:
                errors.append(f"{doc}:{n}: {word}: no fn, mod, const or type of that name under cmd/ or pkg/")


def check_hack(root, errors):
    """The code map's hack/ table names every script directly under hack/ and hack/bench/."""
    doc = (root / "docs/architecture.md").read_text()
    section = doc[doc.index("## hack/"):]
    section = section[:section.index("\n## ", 1)]
    for f in sorted((root / "hack").glob("*.sh")) + sorted((root / "hack/bench").glob("*.sh")):
        rel = f.relative_to(root).as_posix()
        if rel not in section and f.name not in section:
            errors.append(f"docs/architecture.md: the hack/ table does not say what {rel} is for")


def defined_flags(root):
    """Every long flag clap derives from the binary's, the options' and the local cloud's args."""
    flags = set()
    sources = list((root / "cmd/hypercloud/src").rglob("*.rs")) + list((root / "pkg/options/src").rglob("*.rs"))
    sources += list((root / "pkg/localcloud/src/cli").rglob("*.rs")) + [root / "pkg/localcloud/src/cli.rs"]
    attr = re.compile(r"#\[(?:arg|clap)\(((?:\"[^\"]*\"|[^\]\"])*)\)\]\s*((?:#\[[^\]]*\]\s*|///[^\n]*\n\s*)*)(?:pub(?:\([a-z]+\))?\s+)?(\w+)\s*:", re.S)
    for f in sources:
        if not f.exists():
            continue
        text = f.read_text()
        flags.update(re.findall(r'long\s*=\s*"([\w-]+)"', text))
        flags.update(re.findall(r'alias(?:es)?\s*=\s*\[?"([\w-]+)"', text))
        for args, _, field in attr.findall(text):
            if re.search(r"\blong\b(?!\s*=)", args):
                flags.add(field.replace("_", "-"))
    return flags


def check_flags(root, errors):
    """Each flag the personalities guide lists exists: in the golden --help of the controller
    managers for theirs and the shared ones, else among the flags clap derives from the code."""
    doc = "docs/guide/personalities.md"
    text = (root / doc).read_text()
    golden = {
        name: (root / f"cmd/hypercloud/tests/golden/{name}.help").read_text()
        for name in ("cloud-controller-manager", "controller-manager")
    }
    defined = defined_flags(root)
    section = ""
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            section = line[3:]
            continue
        if not line.startswith("| `"):
            continue
        first = line.strip("|").split("|")[0]
        previous = None
        for word in ticked(first):
            for m in re.finditer(r"(?:^|\s)(--?[a-z][\w-]*)", word):
                flag = m.group(1)
                if flag.startswith("--"):
                    name = flag[2:]
                elif previous:  # `-renew-deadline` after `--leader-elect-lease-duration`
                    parts = previous.split("-")
                    names = ["-".join(parts[:i]) + flag for i in range(len(parts) - 1, 0, -1)]
                    name = next((c for c in names if c in defined or any(f"--{c} " in g or f"--{c}\n" in g for g in golden.values())), names[0])
                else:
                    continue
                if len(name) < 2:
                    continue
                previous = name
                if section.startswith(("cloud-controller-manager", "controller-manager", "Flags every")):
                    helps = [golden["cloud-controller-manager"]] if section.startswith("cloud-") else list(golden.values())
                    if section.startswith("controller-manager"):
                        helps = [golden["controller-manager"]]
                    for h in helps:
                        if not re.search(rf"--{re.escape(name)}\b(?!-)", h):
                            errors.append(f"{doc}:{n}: --{name} is not in a golden --help of its section ({section})")
                            break
                elif name not in defined:
                    errors.append(f"{doc}:{n}: --{name}: no clap argument of that name in the code")


def main():
    root = pathlib.Path(__file__).resolve().parents[2]
    if len(sys.argv) == 3 and sys.argv[1] == "--root":
        root = pathlib.Path(sys.argv[2]).resolve()
    errors = []
    check_personalities(root, errors)
    check_crates(root, errors)
    check_openstack_keys(root, errors)
    check_paths(root, errors)
    check_names(root, errors)
    check_hack(root, errors)
    check_flags(root, errors)
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
