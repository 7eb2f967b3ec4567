#!/usr/bin/env python3
"""Import circles between modules, and over-long files, in the workspace's crates.

Reads every crate's `src/` as text (no compiler needed) and draws an edge from module A to
module B when code in A names a path inside B: `use crate::b::...`, `crate::b::f()`,
`super::b::...`, also inside `use` groups (`use crate::{a::x, b::y}`) and through re-exports
(`pub use b::Thing` in a parent). Test code is left out: `#[cfg(test)]` modules, inline or in
their own file.

The rule, checked at every level of the module tree: the children of one module (the crate
root's top-level modules, `api`'s services, ...) must not import each other in a circle, where
"A imports B" means some file below A names something below B. A child naming its parent's
own items, or a parent naming its children, is not counted (that is how a module shares its
helpers); siblings are layered one way.

    hack/lib/module_graph.py circles [--root DIR]
        prints each circle (the modules and one citing line per edge); exit 1 if any
    hack/lib/module_graph.py long-files --max N PATH... [--root DIR]
        prints the .rs files under PATH with more than N lines; exit 1 if any
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text):
    """Blank out comments, string and char literals, keeping line numbers and brace balance."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 40]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            close = '"' + m.group(1)
            j = text.find(close, i + len(m.group(0)))
            j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only blank the former.
            m = re.match(r"'(\\.[^']*|[^'\\])'", text[i:i + 12])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text, start):
    """Index just past the brace that closes the one at `start`."""
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


CFG_TEST_MOD = re.compile(r"#\[cfg\((?:test|all\(test[^\]]*\)|any\(test[^\]]*\))\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])")


def drop_test_modules(text):
    """Removes inline `#[cfg(test)] mod x { ... }` bodies; returns (text, names of test-only file modules)."""
    test_files = set()
    while True:
        m = CFG_TEST_MOD.search(text)
        if not m:
            return text, test_files
        if m.group(2) == ";":
            test_files.add(m.group(1))
            end = m.end()
        else:
            end = matching_brace(text, m.end() - 1)
        text = text[:m.start()] + re.sub(r"[^\n]", " ", text[m.start():end]) + text[end:]


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (aliases and globs kept as path prefixes)."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"as" + IDENT + "$", "", tree.split(" as ")[0])] if tree else []
    prefix = tree[:brace]
    inner = tree[brace + 1:matching_brace(tree, brace) - 1]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if not p:
            continue
        for sub in expand_use(p):
            out.append(prefix + sub if sub != "self" else prefix.rstrip(":"))
    return out


class Crate:
    def __init__(self, name, src):
        self.name = name
        self.src = src
        self.files = {}  # module path tuple -> file
        self.children = {}  # module path tuple -> set of child names
        self.reexports = {}  # module path -> {name: absolute path tuple}
        self.refs = []  # (from module tuple, absolute path tuple, file, line)

    def module_file_of(self, mod):
        return self.files.get(mod)


def module_files(src, root_file):
    """Walks `mod x;` declarations from the root file; yields (module tuple, file, test_only)."""
    out = []

    def walk(mod, file, dir_for_children, test_only):
        try:
            raw = file.read_text()
        except OSError:
            return
        out.append((mod, file, raw, test_only))
        text = strip_comments_and_strings(raw)
        _, test_files = drop_test_modules(text)
        for m in re.finditer(r"^\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", text, re.M):
            name = m.group(1)
            path_attr = re.search(r'#\[path\s*=\s*"([^"]+)"\]', raw[m.start():m.end()])
            if path_attr:
                cand = [dir_for_children / path_attr.group(1)]
            else:
                cand = [dir_for_children / f"{name}.rs", dir_for_children / name / "mod.rs"]
            for c in cand:
                if c.exists():
                    walk(mod + (name,), c, dir_for_children / name, test_only or name in test_files)
                    break

    walk((), root_file, root_file.parent, False)
    return out


def resolve(crate, from_mod, path):
    """An absolute module-path tuple for a `crate::`/`super::`/`self::` path, else None."""
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = from_mod
        rest = segs
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    else:
        # A bare path through a child module declared here (`use api::Thing` in lib.rs).
        if segs[0] in crate.children.get(from_mod, ()):
            base, rest = from_mod, segs
        else:
            return None
    return tuple(base) + tuple(rest)


def target_module(crate, absolute, depth=0):
    """The deepest known module that `absolute` (a path to an item or module) lies in,
    following re-exports (`pub use x::Name`) of the module it stops at."""
    mod = ()
    i = 0
    while i < len(absolute) and mod + (absolute[i],) in crate.files:
        mod = mod + (absolute[i],)
        i += 1
    if i < len(absolute) and depth < 8:
        target = crate.reexports.get(mod, {}).get(absolute[i])
        if target is not None and target != absolute[: i + 1]:
            return target_module(crate, target + absolute[i + 1:], depth + 1)
    return mod


def load_crates(root):
    meta = json.loads(subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"],
                                     cwd=root, check=True, capture_output=True, text=True).stdout)
    crates = []
    for p in meta["packages"]:
        for t in p["targets"]:
            if t["kind"][0] in ("lib", "bin", "proc-macro"):
                src = pathlib.Path(t["src_path"])
                crates.append((f'{p["name"]} ({t["kind"][0]} {t["name"]})', src))
    return crates


def analyse(name, root_file):
    crate = Crate(name, root_file.parent)
    files = [f for f in module_files(root_file.parent, root_file) if not f[3]]
    for mod, file, _, _ in files:
        crate.files[mod] = file
        if mod:
            crate.children.setdefault(mod[:-1], set()).add(mod[-1])
    for mod, file, raw, _ in files:
        text, _ = drop_test_modules(strip_comments_and_strings(raw))
        # use statements (including `pub use` re-exports)
        for m in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
            line = text.count("\n", 0, m.start()) + 1
            for path in expand_use(m.group(2)):
                path = re.sub(r"::\*$", "", path)
                alias = None
                if " as " in m.group(2) and "{" not in m.group(2):
                    path, alias = [s.strip() for s in m.group(2).split(" as ")]
                    path = re.sub(r"\s+", "", path)
                absolute = resolve(crate, mod, path)
                if absolute is None:
                    continue
                crate.refs.append((mod, absolute, file, line))
                if m.group(1) and not m.group(2).rstrip().endswith("*"):
                    crate.reexports.setdefault(mod, {})[alias or absolute[-1]] = absolute
        # other paths: crate::a::b, super::a, self::a (outside use statements)
        body = re.sub(r"\buse\s+[^;]+;", lambda mm: re.sub(r"[^\n]", " ", mm.group(0)), text)
        for m in re.finditer(r"\b((?:crate|super|self)(?:::" + IDENT + r")+)", body):
            line = body.count("\n", 0, m.start()) + 1
            absolute = resolve(crate, mod, m.group(1))
            if absolute is not None:
                crate.refs.append((mod, absolute, file, line))
    return crate


def sibling_circles(crate):
    """[(parent, [siblings in the circle], {(a, b): (file, line)})]."""
    edges = {}
    for from_mod, absolute, file, line in crate.refs:
        to_mod = target_module(crate, absolute)
        # The first point where the two module paths part: the two siblings involved.
        k = 0
        while k < len(from_mod) and k < len(to_mod) and from_mod[k] == to_mod[k]:
            k += 1
        if k == len(from_mod) or k == len(to_mod):
            continue  # one is an ancestor of the other (or the same module)
        parent = from_mod[:k]
        a, b = from_mod[k], to_mod[k]
        edges.setdefault(parent, {}).setdefault((a, b), (file, line))
    found = []
    for parent, es in sorted(edges.items()):
        graph = {}
        for a, b in es:
            graph.setdefault(a, set()).add(b)
        for scc in strongly_connected(graph):
            if len(scc) > 1:
                found.append((parent, scc, {e: w for e, w in es.items() if e[0] in scc and e[1] in scc}))
    return found


def strongly_connected(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    nodes = set(graph) | {b for bs in graph.values() for b in bs}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            out.append(sorted(scc))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def cmd_circles(root):
    bad = 0
    for name, src in load_crates(root):
        crate = analyse(name, src)
        for parent, scc, es in sibling_circles(crate):
            bad += 1
            where = "::".join(("crate",) + parent)
            print(f"{name}: modules of {where} import each other in a circle: {' <-> '.join(scc)}")
            for (a, b), (file, line) in sorted(es.items()):
                print(f"    {a} -> {b}: {pathlib.Path(file).relative_to(root)}:{line}")
    return 1 if bad else 0


def cmd_long_files(root, limit, paths):
    bad = 0
    for p in paths:
        for f in sorted((root / p).rglob("*.rs")):
            if "target" in f.parts:
                continue
            n = sum(1 for _ in f.open())
            if n > limit:
                bad += 1
                print(f"{f.relative_to(root)}: {n} lines (at most {limit})")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["circles", "long-files"])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--max", type=int, default=800)
    ap.add_argument("--root", default=".")
    a = ap.parse_intermixed_args()
    root = pathlib.Path(a.root).resolve()
    if a.what == "circles":
        sys.exit(cmd_circles(root))
    sys.exit(cmd_long_files(root, a.max, a.paths))


if __name__ == "__main__":
    main()
