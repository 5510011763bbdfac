"""The dependency graph between the top-level modules of a Rust crate, from its `crate::` paths.

`python tests/module_graph.py codecs/src` prints the graph of the engine as
docs/architecture.md shows it (one line per module: what it uses), and exits 1 if two
modules depend on each other, directly or through others. Test modules and comments are
left out: only what the code compiles against counts.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# `crate::name` and each name of `crate::{a, b::c}`.
_PATH = re.compile(r"\bcrate::([a-z_0-9]+)")
_GROUP = re.compile(r"\bcrate::\{([^}]*)\}")


def _code(text: str) -> str:
    """The file without its test module and its comments."""
    text = text.split("#[cfg(test)]")[0]
    return "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))


def graph(root: Path) -> dict[str, set[str]]:
    """Per top-level module of the crate at `root`, the other top-level modules it uses."""
    edges: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.rs")):
        parts = path.relative_to(root).parts
        if parts[0] in ("lib.rs", "main.rs"):
            continue
        module = parts[0].removesuffix(".rs")
        used = edges.setdefault(module, set())
        code = _code(path.read_text())
        names = set(_PATH.findall(code))
        for group in _GROUP.findall(code):
            names |= {item.strip().split("::")[0] for item in group.split(",") if item.strip()}
        used |= {name for name in names if name != module and name not in ("self", "super")}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that depend on each other (strongly connected, more than one)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return groups


def layers(edges: dict[str, set[str]]) -> list[list[str]]:
    """Modules by floor: a module sits one floor above the highest module it uses."""
    floor: dict[str, int] = {}

    def height(v: str) -> int:
        if v not in floor:
            floor[v] = 0
            floor[v] = 1 + max((height(w) for w in edges.get(v, ())), default=-1)
        return floor[v]

    for v in edges:
        height(v)
    out: list[list[str]] = [[] for _ in range(max(floor.values(), default=-1) + 1)]
    for v, f in floor.items():
        out[f].append(v)
    return [sorted(level) for level in out]


def render(edges: dict[str, set[str]]) -> str:
    """The graph as docs/architecture.md shows it: floor by floor, each module with its uses."""
    lines = []
    for level, modules in enumerate(layers(edges)):
        for m in modules:
            uses = ", ".join(sorted(edges.get(m, ()))) or "-"
            lines.append(f"{level}  {m:<8} uses {uses}")
    return "\n".join(lines)


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "codecs/src")
    g = graph(root)
    print(render(g))
    found = cycles(g)
    for group in found:
        print("cycle:", " <-> ".join(group))
    sys.exit(1 if found else 0)
