#!/usr/bin/env python3
"""Self-test of module_graph.py on throwaway crates: a circle must fail, layers must pass."""
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def crate(files):
    d = pathlib.Path(tempfile.mkdtemp(prefix="module-graph-test."))
    (d / "Cargo.toml").write_text('[package]\nname = "t"\nversion = "0.0.0"\nedition = "2021"\n[lib]\npath = "src/lib.rs"\n')
    for name, text in files.items():
        p = d / "src" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return d


def circles(d):
    r = subprocess.run([sys.executable, str(HERE / "module_graph.py"), "circles", "--root", str(d)],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


CASES = [
    ("a circle through a use group", 1, {
        "lib.rs": "mod a;\nmod b;\n",
        "a.rs": "use crate::{b::{Y}, a as _};\npub struct X;\n",
        "b.rs": "pub struct Y;\nfn f() -> crate::a::X { crate::a::X }\n",
    }),
    ("a circle through a re-export in the root", 1, {
        "lib.rs": "mod a;\nmod b;\npub use a::X;\n",
        "a.rs": "pub struct X;\nfn f(_: super::b::Y) {}\n",
        "b.rs": "pub struct Y;\nfn f(_: crate::X) {}\n",
    }),
    ("a circle deeper down", 1, {
        "lib.rs": "mod api;\n",
        "api.rs": "mod c;\nmod v;\n",
        "api/c.rs": "use super::v::V;\npub struct C;\n",
        "api/v.rs": "pub struct V;\nfn f(_: crate::api::c::C) {}\n",
    }),
    ("layers one way; children use their parent's helpers", 0, {
        "lib.rs": "mod api;\nmod model;\nmod store;\npub struct Shared;\n",
        "store.rs": "pub struct S;\nfn f(_: crate::Shared) {}\n",
        "model.rs": "use crate::store::S;\n",
        "api.rs": "mod c;\npub struct ApiError;\nuse crate::model;\n",
        "api/c.rs": "use super::ApiError;\nuse crate::store::S;\n",
    }),
    ("test code and comments are left out", 0, {
        "lib.rs": "mod a;\nmod b;\n#[cfg(test)]\nmod t;\n",
        "a.rs": "pub struct X;\n// crate::b::Y in a comment\nconst S: &str = \"crate::b::Y\";\n#[cfg(test)]\nmod tests {\n    use crate::b::Y;\n}\n",
        "b.rs": "pub struct Y;\nfn f(_: crate::a::X) {}\n",
        "t.rs": "use crate::a::X;\nuse crate::b::Y;\n",
    }),
]

failed = 0
for name, want, files in CASES:
    rc, out = circles(crate(files))
    ok = rc == want
    failed += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {rc}, want {want}" + ("" if ok else "\n" + out))
sys.exit(1 if failed else 0)
