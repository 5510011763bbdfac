"""The dependency graph between the top-level modules of a Rust crate, from its `crate::` paths.

`python tests/support/module_graph.py codecs/src` prints the graph of the engine as
docs/architecture.md shows it (one line per module: what it uses), and exits 1 if two
modules depend on each other, directly or through others. Test modules and comments are
left out: only what the code compiles against counts. `code_lines` (every line outside
the test modules) is what tests/docs/test_architecture.py holds each file's length to.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# `crate::name` and each name of `crate::{a, b::c}`.
_PATH = re.compile(r"\bcrate::([a-z_0-9]+)")
_GROUP = re.compile(r"\bcrate::\{([^}]*)\}")


_CFG_TEST = "#[cfg(test)]"
# After `#[cfg(test)]` and any further attributes and comments: a module with a body.
_TEST_MODULE = re.compile(r"(?:pub(?:\([\w:\s]*\))?\s+)?mod\s+\w+\s*\{")


def _skip_literal(text: str, i: int) -> int:
    """If a comment, string or char literal starts at `i`, the index just past it; else `i`.

    Enough of Rust's lexer for braces inside them not to count: `//` and nested `/* */`
    comments, strings with escapes, raw strings (`r"…"`, `r#"…"#`, `br"…"`), and char
    literals told apart from lifetimes (`'{'` is a char, `'a` a lifetime)."""
    c = text[i]
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text.startswith("/*", i):
        depth, j = 1, i + 2
        while j < len(text) and depth:
            if text.startswith("/*", j):
                depth, j = depth + 1, j + 2
            elif text.startswith("*/", j):
                depth, j = depth - 1, j + 2
            else:
                j += 1
        return j
    raw = re.match(r'b?r(#*)"', text[i : i + 260])
    if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
        close = '"' + raw.group(1)
        end = text.find(close, i + raw.end())
        return len(text) if end < 0 else end + len(close)
    if c == '"':
        j = i + 1
        while j < len(text) and text[j] != '"':
            j += 2 if text[j] == "\\" else 1
        return j + 1
    if c == "'":
        if text.startswith("\\", i + 1):
            end = text.find("'", i + 3)
            return len(text) if end < 0 else end + 1
        if i + 2 < len(text) and text[i + 2] == "'":
            return i + 3
    return i


def _closing_brace(text: str, open_at: int) -> int:
    """The index of the `}` that closes the `{` at `open_at`."""
    depth, i = 0, open_at
    while i < len(text):
        skipped = _skip_literal(text, i)
        if skipped != i:
            i = skipped
            continue
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text) - 1


def _module_after(text: str, i: int) -> re.Match[str] | None:
    """The test module the `#[cfg(test)]` ending at `i` is on, if it is on a module with a body:
    whitespace, comments and other attributes may come between."""
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        skipped = _skip_literal(text, i) if i < len(text) else i
        if skipped != i:
            i = skipped
        elif text.startswith("#[", i):
            i = _closing_bracket(text, i + 1) + 1
        else:
            return _TEST_MODULE.match(text, i)


def _closing_bracket(text: str, open_at: int) -> int:
    depth, i = 0, open_at
    while i < len(text):
        skipped = _skip_literal(text, i)
        if skipped != i:
            i = skipped
            continue
        if text[i] == "[":
            depth += 1
        elif text[i] == "]":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text) - 1


def _test_module_spans(text: str) -> list[tuple[int, int]]:
    """Where each `#[cfg(test)] mod … { … }` block is: from the line of its `mod` (code before it
    on that line stays out) to the end of its closing brace's line."""
    spans, i = [], 0
    while i < len(text):
        skipped = _skip_literal(text, i)
        if skipped != i:
            i = skipped
            continue
        if text.startswith(_CFG_TEST, i):
            module = _module_after(text, i + len(_CFG_TEST))
            if module:
                begin = module.start()
                line_start = text.rfind("\n", 0, begin) + 1
                if not text[line_start:begin].strip():
                    begin = line_start
                end = _closing_brace(text, module.end() - 1) + 1
                line_end = text.find("\n", end)
                line_end = len(text) if line_end < 0 else line_end + 1
                if not text[end:line_end].strip():
                    end = line_end
                spans.append((begin, end))
                i = end
                continue
        i += 1
    return spans


def outside_tests(text: str) -> str:
    """The file without its `#[cfg(test)] mod … { … }` blocks: every other line stays, the
    attributes and comments before such a `mod` too. A `#[cfg(test)]` on anything else (a
    function, an impl, `mod tests;` whose file is elsewhere) hides nothing after it."""
    kept, start = [], 0
    for begin, end in _test_module_spans(text):
        kept.append(text[start:begin])
        start = end
    kept.append(text[start:])
    return "".join(kept)


def inside_tests(text: str) -> str:
    """The file's `#[cfg(test)] mod … { … }` blocks, one after the other."""
    return "".join(text[begin:end] for begin, end in _test_module_spans(text))


# The most lines a Rust file may have outside its test modules (tests/docs/test_architecture.py).
CODE_LINES_AT_MOST = 600


def code_lines(text: str) -> int:
    """The lines a file has outside its test modules: what the cap holds."""
    return outside_tests(text).count("\n")


def _code(text: str) -> str:
    """The file without its test modules and its comments."""
    text = outside_tests(text)
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
