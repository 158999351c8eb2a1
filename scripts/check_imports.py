#!/usr/bin/env python3
"""Check that no two files of a Rust crate import each other, directly or around a circle.

Each file of `crates/*/src` is one module (`a/mod.rs` is module `a`). A file depends on the
modules its paths name: `use crate::x::...`, `crate::x::y` in code, `super::...`, and in a file
with child modules `use child::...` or `child::f()`. A path to a name that a module re-exports
(`crate::LoadConfig`, re-exported by lib.rs from `config`) depends on the module that defines it.
A module's paths into its own submodules are not dependencies: a parent declares, assembles and
re-exports its children, and the children may use what their parent defines for all of them
(lib.rs's `Server` trait, main.rs's error type); nor are paths into the file's own inline modules
(`mod tests { use super::*; }`). Every strongly connected group of two or more files is a circle
and fails the check, except the ones listed in KNOWN_CIRCLES.

usage: scripts/check_imports.py [CRATE_DIR ...]   (default: every crate under crates/)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Circles that another change is removing; each names the change. Keep this empty otherwise.
KNOWN_CIRCLES: dict[str, set[frozenset[str]]] = {}

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r'b?r(#*)".*?"\1|b?"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'', re.S)
_USE = re.compile(r"\buse\s+([^;]+);")
_MOD_DECL = re.compile(rf"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+({IDENT})\s*;", re.M)
_INLINE_MOD = re.compile(rf"\bmod\s+{IDENT}\s*\{{")


def strip(text: str) -> str:
    """The code without comments and string literals (whose text is not a path)."""
    text = _COMMENT.sub(" ", text)
    return _STRING.sub('""', text)


def split_inline_modules(code: str) -> tuple[str, str]:
    """(code outside inline `mod x { ... }` blocks, code inside them)."""
    outside, inside, i = [], [], 0
    while (m := _INLINE_MOD.search(code, i)) is not None:
        outside.append(code[i : m.start()])
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        inside.append(code[m.end() : j])
        i = j
    outside.append(code[i:])
    return "".join(outside), "".join(inside)


def expand_use(tree: str) -> list[str]:
    """`a::{b, c::{d as x, e}}` -> [`a::b`, `a::c::d@x`, `a::c::e`] (`@` marks a rename)."""
    tree = re.sub(r"\s+as\s+", "@", tree)
    tree = re.sub(r"\s+", "", tree).replace("::*", "")
    if "{" not in tree:
        return [tree]
    head, _, rest = tree.partition("{")
    body, parts, depth, cur = rest[:-1], [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    out = []
    for p in filter(None, parts):
        for tail in expand_use(p):
            out.append(head + tail if tail != "self" else head.rstrip(":"))
    return out


class Crate:
    def __init__(self, src: Path):
        self.src = src
        self.root = next(p for p in (src / "lib.rs", src / "main.rs") if p.exists())
        self.modules: dict[tuple[str, ...], Path] = {}
        self._reexports: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}
        self._collect(self.root, ())

    def _collect(self, file: Path, path: tuple[str, ...]) -> None:
        self.modules[path] = file
        code, _ = split_inline_modules(strip(file.read_text()))
        base = file.parent if file.name in ("lib.rs", "main.rs", "mod.rs") else file.with_suffix("")
        for name in _MOD_DECL.findall(code):
            for child in (base / f"{name}.rs", base / name / "mod.rs"):
                if child.exists():
                    self._collect(child, (*path, name))
                    break

    def name(self, file: Path) -> str:
        return str(file.relative_to(self.src))

    def resolve(self, path: tuple[str, ...], seen: int = 0) -> Path:
        """The file that defines `path`: its longest module prefix, or through a re-export."""
        for n in range(len(path), -1, -1):
            module = path[:n]
            if module in self.modules:
                rest = path[n:]
                reexported = self.reexports(module).get(rest[0]) if rest else None
                if reexported is not None and seen < 8:
                    return self.resolve((*reexported, *rest[1:]), seen + 1)
                return self.modules[module]
        return self.root

    def reexports(self, module: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """Names that `module` re-exports from its own submodules -> their full paths."""
        if module not in self._reexports:
            code, _ = split_inline_modules(strip(self.modules[module].read_text()))
            names: dict[str, tuple[str, ...]] = {}
            for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
                for p in expand_use(m.group(1)):
                    path, _, alias = p.partition("@")
                    parts = tuple(path.split("::"))
                    if parts[0] == "self":
                        parts = parts[1:]
                    if len(parts) >= 2 and (*module, parts[0]) in self.modules:
                        names[alias or parts[-1]] = (*module, *parts)
            self._reexports[module] = names
        return self._reexports[module]

    def dependencies(self, module: tuple[str, ...]) -> set[Path]:
        file = self.modules[module]
        code, inline = split_inline_modules(strip(file.read_text()))
        children = {p[-1] for p in self.modules if len(p) == len(module) + 1 and p[:-1] == module}
        paths: list[str] = []
        for text, in_inline in ((code, False), (inline, True)):
            used = [p for m in _USE.finditer(text) for p in expand_use(m.group(1))]
            inline_paths = re.findall(rf"\b(?:crate|super|self)(?:::{IDENT})+", _USE.sub(" ", text))
            child_paths = [] if in_inline else re.findall(rf"(?<![:\w])((?:{'|'.join(children) or '(?!)'})::{IDENT})", text)
            for p in [*used, *inline_paths, *child_paths]:
                if in_inline and p.startswith(("super", "self")):
                    continue  # the inline module's super is this file
                paths.append(p)
        deps = set()
        for p in paths:
            parts = tuple(p.partition("@")[0].split("::"))
            if parts[0] == "crate":
                target = parts[1:]
            elif parts[0] == "super":
                up = module
                while parts and parts[0] == "super":
                    up, parts = up[:-1], parts[1:]
                target = (*up, *parts)
            elif parts[0] == "self":
                target = (*module, *parts[1:])
            elif parts[0] in children:
                target = (*module, *parts)
            else:
                continue  # another crate or std
            dep = self.resolve(target)
            inside = next(m for m, f in self.modules.items() if f == dep)
            if dep != file and inside[: len(module)] != module:
                deps.add(dep)
        return deps

    def circles(self) -> list[list[str]]:
        graph = {f: self.dependencies(m) for m, f in self.modules.items()}
        return [sorted(self.name(f) for f in scc) for scc in strongly_connected(graph) if len(scc) > 1]


def strongly_connected(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """Tarjan's algorithm, iterative."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    out: list[list[Path]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    scc.append(n)
                    if n == node:
                        break
                out.append(scc)
    return out


def main(argv: list[str]) -> int:
    if any(a.startswith("-") for a in argv):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 0 if argv in (["-h"], ["--help"]) else 2
    dirs = [Path(a) for a in argv] or sorted(p for p in (ROOT / "crates").iterdir() if (p / "src").is_dir())
    if missing := [str(d) for d in dirs if not ((d / "src" / "lib.rs").exists() or (d / "src" / "main.rs").exists())]:
        print(f"check_imports: not a crate directory (no src/lib.rs or src/main.rs): {', '.join(missing)}", file=sys.stderr)
        return 2
    failed = False
    for d in dirs:
        crate = Crate(d / "src")
        known = KNOWN_CIRCLES.get(d.name, set())
        circles = crate.circles()
        for gone in known - {frozenset(c) for c in circles}:
            print(f"note: crates/{d.name}: {' <-> '.join(sorted(gone))} is no circle any more; remove it from KNOWN_CIRCLES", file=sys.stderr)
        for circle in circles:
            if frozenset(circle) in known:
                continue
            failed = True
            print(f"crates/{d.name}: these files import each other in a circle: {' <-> '.join(circle)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
