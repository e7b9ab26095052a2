"""The graph of module dependencies inside one Rust crate, and its cycles.

A module depends on another module of the same crate when its own code (not that of its child
modules) names it or an item of it through a path: `use crate::…`, `crate::…`, `super::…`,
`self::…`, or a path that starts with one of its child modules (`use child::X`, `child::f()`).
A path resolves to the deepest module it names; an item imported into that module by a `use`
(a re-export, or `use super::X` of a parent's private import) is followed to where it comes
from, so `super::X` is an edge to the parent only for an X the parent defines (a glob,
`use super::*`, counts as an edge to the parent). `mod tests` and modules under `#[cfg(test)]`
are left out. Comments and string literals are ignored.

The nodes are the modules that have a file of their own: an inline module (`mod exports { … }`
inside aclop.rs) is a section of its file and counts as part of that file's module, so its
`use super::*` is no edge (Crate(..., split_inline=True) makes inline modules nodes too).
Code generated at build time (`include!(concat!(env!("OUT_DIR"), …))`) is not seen.

usage: python modgraph.py CRATE_SRC_DIR...   (prints the edges, then the cycles; exit 1 on a cycle)
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

Edge = tuple[str, str]


def strip(src: str) -> str:
    """`src` with comments and the contents of string, byte-string and char literals replaced by
    spaces (newlines kept), so offsets and line numbers stay those of `src`."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (
            i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")
        ):
            end = src.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            blank(m.end(), j - 1 - len(m.group(1)))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        elif c == "'":
            m = re.compile(r"'(\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'\n])'").match(src, i)
            if m:  # a char literal (else a lifetime or label)
                blank(i + 1, m.end() - 1)
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


@dataclass
class Module:
    path: str  # "crate", "crate::a::b"
    file: Path
    inline: bool  # declared `mod name { … }` (not a file of its own)
    start: int  # the module's span in the stripped text of `file`
    text: str  # its own code: the span with inline child modules blanked
    children: dict[str, str] = field(default_factory=dict)  # name -> module path
    imports: dict[str, list[str]] = field(default_factory=dict)  # name -> absolute path it imports
    refs: list[tuple[list[str], int]] = field(default_factory=list)  # absolute paths named, with offset

    def line(self, stripped: dict[Path, str], off: int) -> int:
        return stripped[self.file].count("\n", 0, self.start + off) + 1


MOD = re.compile(r"((?:#\s*\[[^\]]*\]\s*)*)(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")


def _close(text: str, open_at: int) -> int:
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    raise ValueError("unbalanced braces")


def _skipped(attrs: str, name: str) -> bool:
    return name == "tests" or re.search(r"cfg\s*\(\s*test\s*\)", attrs) is not None


class Crate:
    def __init__(self, src: Path, root: str | None = None, split_inline: bool = False) -> None:
        """`src`: the crate's source directory, holding lib.rs or main.rs (or name `root`, e.g.
        "bin/tool.rs"). `split_inline`: inline modules are nodes of their own."""
        if root is None:
            root = "lib.rs" if (src / "lib.rs").is_file() else "main.rs"
        self.stripped: dict[Path, str] = {}
        self.modules: dict[str, Module] = {}
        self.edges: dict[Edge, str] = {}  # edge -> "file:line: path" of its first occurrence
        self._file_module("crate", src / root, src)
        for m in self.modules.values():
            self._scan_paths(m)
        for m in self.modules.values():
            for segs, off in m.refs:
                target = self.resolve(segs)
                if target is None:
                    continue
                a, b = (m.path, target) if split_inline else (self.node(m.path), self.node(target))
                if a != b:
                    self.edges.setdefault((a, b), f"{m.file}:{m.line(self.stripped, off)}: {'::'.join(segs)}")

    def node(self, path: str) -> str:
        """The module with a file of its own that holds module `path`."""
        while self.modules[path].inline:
            path = path.rsplit("::", 1)[0]
        return path

    # --- the module tree ---------------------------------------------------------------------
    def _file_module(self, path: str, file: Path, child_dir: Path) -> None:
        text = strip(file.read_text())
        if re.search(r"#\s*\[\s*path\b", text):
            raise ValueError(f"{file}: #[path] modules are not supported")
        self.stripped[file] = text
        self._module(path, file, 0, len(text), child_dir, False)

    def _module(self, path: str, file: Path, start: int, end: int, child_dir: Path, inline: bool) -> None:
        full = self.stripped[file]
        own = list(full[start:end])
        m = Module(path, file, inline, start, "")
        self.modules[path] = m
        pos = start
        while (d := MOD.search(full, pos, end)) is not None:
            attrs, name, kind = d.group(1), d.group(2), d.group(3)
            if kind == "{":
                close = _close(full, d.end() - 1)
                for k in range(d.start() - start, close + 1 - start):  # the child's code is not ours
                    if own[k] != "\n":
                        own[k] = " "
                if not _skipped(attrs, name):
                    m.children[name] = f"{path}::{name}"
                    self._module(m.children[name], file, d.end(), close, child_dir / name, True)
                pos = close + 1
            else:
                pos = d.end()
                if _skipped(attrs, name):
                    continue
                m.children[name] = f"{path}::{name}"
                for cand, cdir in (
                    (child_dir / f"{name}.rs", child_dir / name),
                    (child_dir / name / "mod.rs", child_dir / name),
                ):
                    if cand.is_file():
                        self._file_module(m.children[name], cand, cdir)
                        break
                else:
                    raise FileNotFoundError(f"{file}: mod {name}; has no file under {child_dir}")
        m.text = "".join(own)

    # --- paths ---------------------------------------------------------------------------------
    def _absolute(self, m: Module, segs: list[str]) -> list[str] | None:
        """`segs` (as written in m) as a path from the crate root, or None (another crate, std,
        a local name)."""
        here = m.path.split("::")
        head = segs[0]
        if head == "crate":
            return ["crate"] + segs[1:]
        if head == "self":
            return here + segs[1:]
        if head == "super":
            k = 0
            while k < len(segs) and segs[k] == "super":
                k += 1
            if k >= len(here):
                raise ValueError(f"{m.file}: {'::'.join(segs)} goes above the crate root")
            return here[: len(here) - k] + segs[k:]
        if head in m.children:
            return here + segs
        return None

    def _scan_paths(self, m: Module) -> None:
        text = re.sub(r"pub\s*\(\s*in\s[^)]*\)", lambda v: " " * len(v.group(0)), m.text)  # visibility, not use
        for u in re.finditer(r"(?<![\w$])use\s+([^;]*);", text):
            for segs, alias in _use_tree(u.group(1)):
                if not segs or segs[0] == "":  # ::extern_crate
                    continue
                absolute = self._absolute(m, segs)
                if absolute is None:
                    continue
                if absolute[-1] == "self":
                    absolute = absolute[:-1]
                m.refs.append((absolute, u.start()))
                if absolute[-1] != "*":
                    m.imports[alias or absolute[-1]] = absolute
            text = text[: u.start()] + " " * (u.end() - u.start()) + text[u.end() :]
        for p in re.finditer(r"(?<![\w$:.])(\w+)((?:\s*::\s*\w+)+)", text):
            segs = [p.group(1)] + [s.strip() for s in p.group(2).split("::")[1:]]
            absolute = self._absolute(m, segs)
            if absolute is not None:
                m.refs.append((absolute, p.start()))

    def resolve(self, absolute: list[str], seen: frozenset = frozenset()) -> str | None:
        """The module an absolute path depends on: the deepest module it names, or, for an item
        that module imports, the module the import resolves to."""
        k = len(absolute)
        while k > 0 and "::".join(absolute[:k]) not in self.modules:
            k -= 1
        if k == 0:
            return None
        mod = "::".join(absolute[:k])
        rest = absolute[k:]
        if rest and rest[0] not in ("*", "self") and mod not in seen:
            imported = self.modules[mod].imports.get(rest[0])
            if imported is not None:
                return self.resolve(imported + rest[1:], seen | {mod})
        return mod


def _use_tree(tree: str) -> list[tuple[list[str], str | None]]:
    """The paths of a use tree (`a::{b, c::*, d as e, self}`): (segments, alias)."""
    toks = re.findall(r"::|\w+|[{},*]", tree)
    pos = 0

    def parse(prefix: list[str]) -> list[tuple[list[str], str | None]]:
        nonlocal pos
        segs = list(prefix)
        if pos < len(toks) and toks[pos] == "::" and not segs:
            segs.append("")  # a leading `::`: another crate
            pos += 1
        while pos < len(toks):
            t = toks[pos]
            if t == "{":
                pos += 1
                out = []
                while toks[pos] != "}":
                    out += parse(segs)
                    if toks[pos] == ",":
                        pos += 1
                pos += 1
                return out
            if t == "*":
                pos += 1
                return [(segs + ["*"], None)]
            if t in (",", "}"):
                break
            if t == "::":
                pos += 1
                continue
            segs.append(t)
            pos += 1
            if pos + 1 < len(toks) and toks[pos] == "as":
                alias = toks[pos + 1]
                pos += 2
                return [(segs, None if alias == "_" else alias)]
        alias = segs[-2] if segs and segs[-1] == "self" and len(segs) > 1 else None
        return [(segs, alias)]

    return parse([])


def components(edges: set[Edge] | dict[Edge, str]) -> list[list[str]]:
    """The strongly connected components of more than one module (each sorted): every module of
    one reaches every other, so each holds at least one cycle."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(comps)


def shortest_cycle(edges: set[Edge] | dict[Edge, str], comp: list[str]) -> list[str]:
    """A shortest cycle (a, …, a) through comp[0] inside component `comp`."""
    members, start = set(comp), comp[0]
    prev: dict[str, str] = {}
    queue = [start]
    while queue:  # breadth first, back to `start`
        v = queue.pop(0)
        nxt = sorted(b for a, b in edges if a == v and b in members)
        if start in nxt:
            path = [v]
            while path[0] != start:
                path.insert(0, prev[path[0]])
            return path + [start]
        for w in nxt:
            if w not in prev and w != start:
                prev[w] = v
                queue.append(w)
    raise ValueError(f"{comp} is not strongly connected")


def cycles(edges: set[Edge] | dict[Edge, str]) -> list[list[str]]:
    """One shortest cycle per component with a cycle."""
    return [shortest_cycle(edges, c) for c in components(edges)]


def describe(crate: Crate) -> list[str]:
    """One paragraph per component with a cycle: a cycle, then every edge inside the component
    with where it comes from."""
    out = []
    for comp in components(crate.edges):
        inside = sorted((e, w) for e, w in crate.edges.items() if e[0] in comp and e[1] in comp)
        out.append(
            "cycle "
            + " -> ".join(shortest_cycle(crate.edges, comp))
            + f" (among {', '.join(comp)})"
            + "".join(f"\n    {a} -> {b}: {w}" for (a, b), w in inside)
        )
    return out


def main(argv: list[str]) -> int:
    bad = 0
    for src in argv:
        crate = Crate(Path(src))
        print(f"{src}: {len(crate.modules)} modules, {len(crate.edges)} edges")
        for (a, b), where in sorted(crate.edges.items()):
            print(f"  {a} -> {b}    ({where})")
        for text in describe(crate):
            bad += 1
            print(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
