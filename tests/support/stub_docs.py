"""One source for each docstring: the stub (`python/zarrpipe/_zarrpipe.pyi`) is where the
Python API of the compiled module is documented (editors, type checkers and the docs site read
it); the binding's `///` comments, which become the runtime `__doc__` (`help()`, IPython's
`?`), are copies of it. This module finds, for each documented name of the stub, the Rust item
that defines it (`#[pyclass]`, a method of its `#[pymethods]`, a `#[pyfunction]`, an exception
of `create_exception!`, a view of `selection_view!`) and compares or rewrites its doc.

    python tests/support/stub_docs.py            # list the names whose docs differ
    python tests/support/stub_docs.py --write    # copy the stub's docs into src/

`tests/docs/test_stub_docs.py` fails while any differ. Slot methods (`__len__`,
`__getitem__`, ...) are left out: CPython gives them its own fixed docs.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "python" / "zarrpipe" / "_zarrpipe.pyi"
SRC = ROOT / "src"
# Methods CPython implements as type slots: their `__doc__` is CPython's, not the binding's.
SLOTS = {
    "__new__", "__init__", "__len__", "__getitem__", "__setitem__", "__delitem__",
    "__contains__", "__iter__", "__next__", "__eq__", "__hash__", "__repr__", "__str__",
    "__enter__", "__exit__", "__await__", "__bool__",
}  # fmt: skip
ITEM = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(fn|struct)\s+(\w+)")


@dataclass
class Site:
    """Where one Python name's doc lives in the binding."""

    path: Path
    kind: str  # "comments": `///` lines [start, end); "literal": a doc string argument
    start: int
    end: int
    indent: str = ""
    rust_name: str = ""
    attrs: list[str] = field(default_factory=list)


def stub_docs() -> dict[str, str]:
    """Qualified name -> docstring (cleaned) of every documented class, method, property and
    function of the stub, slots left out."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    out: dict[str, str] = {}

    def visit(nodes: list[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.name in SLOTS:
                continue
            doc = ast.get_docstring(node)
            if doc is not None:
                out[prefix + node.name] = doc
            if isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")

    visit(tree.body, "")
    return out


def _items(lines: list[str]) -> list[tuple[int, int, list[str]]]:
    """(first line of its doc-and-attribute block, item line, the attributes) of every `fn`
    and `struct` of a file."""
    out = []
    i = 0
    while i < len(lines):
        start = i
        attrs: list[str] = []
        while i < len(lines):
            s = lines[i].strip()
            if s.startswith("///"):
                i += 1
            elif s.startswith("#["):
                attr, depth = "", 0
                while i < len(lines):
                    attr += lines[i].strip()
                    depth += lines[i].count("[") - lines[i].count("]")
                    i += 1
                    if depth <= 0:
                        break
                attrs.append(attr)
            else:
                break
        if i < len(lines) and ITEM.match(lines[i]):
            out.append((start, i, attrs))
        i += 1
    return out


def _py_name(fn: str, attrs: list[str]) -> str | None:
    for a in attrs:
        if a.startswith("#[setter") or a.startswith("#[new]") or a.startswith("#[classattr"):
            return None
        m = re.search(r'name\s*=\s*"(\w+)"', a) if a.startswith("#[pyo3(") else None
        if m:
            return m.group(1)
        m = re.match(r"#\[getter\((\w+)\)\]", a)
        if m:
            return m.group(1)
    if any(a == "#[getter]" for a in attrs) and fn.startswith("get_"):
        return fn[4:]
    return fn


def rust_sites() -> dict[str, Site]:
    """Qualified Python name -> the binding's doc site of it."""
    classes: dict[str, str] = {}  # Rust struct -> Python class
    sites: dict[str, Site] = {}
    files = sorted(SRC.rglob("*.rs"))
    parsed = {p: p.read_text(encoding="utf-8").split("\n") for p in files}
    for path, lines in parsed.items():
        for start, at, attrs in _items(lines):
            m = ITEM.match(lines[at])
            assert m
            indent, kind, name = m.groups()
            pyclass = next((a for a in attrs if a.startswith("#[pyclass")), None)
            if kind == "struct" and pyclass:
                py = re.search(r'name\s*=\s*"(\w+)"', pyclass)
                classes[name] = py.group(1) if py else name
                sites[classes[name]] = Site(path, "comments", start, at, indent, name, attrs)
            elif kind == "fn" and any(a.startswith("#[pyfunction") for a in attrs):
                py_name = _py_name(name, attrs)
                if py_name:
                    sites[py_name] = Site(path, "comments", start, at, indent, name, attrs)
    for path, lines in parsed.items():
        text = "\n".join(lines)
        for block in re.finditer(r"^#\[pymethods\]\nimpl (\w+) \{\n(.*?)^\}", text, re.S | re.M):
            cls = classes.get(block.group(1))
            if cls is None:
                continue
            first = text[: block.start(2)].count("\n")
            body = block.group(2).split("\n")
            for start, at, attrs in _items(body):
                m = ITEM.match(body[at])
                if not m or m.group(2) != "fn" or len(m.group(1)) != 4:
                    continue
                py_name = _py_name(m.group(3), attrs)
                if py_name:
                    sites[f"{cls}.{py_name}"] = Site(
                        path,
                        "comments",
                        first + start,
                        first + at,
                        m.group(1),
                        m.group(3),
                        attrs,
                    )
        for call in re.finditer(
            r"(create_exception!\(\s*\w+,\s*(\w+),\s*[\w:]+,\s*)"
            r'|(selection_view!\(\s*\w+,\s*"(\w+)",\s*"\w+",\s*)'
            r'|(new_class\(\s*py,\s*"(\w+)",\s*bases,\s*)',
            text,
        ):
            name = call.group(2) or call.group(4) or call.group(6)
            at = call.end()
            end = _doc_arg_end(text, at)
            sites[name] = Site(path, "literal", at, end)
    return sites


def _doc_arg_end(text: str, at: int) -> int:
    """The end of the doc argument starting at `at`: a string literal or `concat!(...)`."""
    if text.startswith("concat!(", at):
        depth, i = 0, at
        while True:
            c = text[i]
            if c == '"':
                i = _literal_end(text, i)
                continue
            depth += c == "("
            depth -= c == ")"
            i += 1
            if depth == 0 and c == ")":
                return i
    return _literal_end(text, at)


def _literal_end(text: str, at: int) -> int:
    i = at + 1
    while text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _unescape(lit: str) -> str:
    lit = re.sub(r"\\\n\s*", "", lit)  # a line continuation
    return lit[1:-1].encode("latin-1", "backslashescape").decode("unicode_escape")


def rust_doc(site: Site) -> str:
    """The doc text at `site`, as pyo3 makes `__doc__` of it."""
    if site.kind == "literal":
        text = site.path.read_text(encoding="utf-8")[site.start : site.end]
        parts = re.findall(r'"(?:[^"\\]|\\.)*"', text, re.S)
        return inspect.cleandoc("".join(_unescape(p) for p in parts))
    lines = site.path.read_text(encoding="utf-8").split("\n")[site.start : site.end]
    docs = [ln.strip()[3:] for ln in lines if ln.strip().startswith("///")]
    return inspect.cleandoc("\n".join(d[1:] if d.startswith(" ") else d for d in docs))


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace('"', '\\"')


def _literal(doc: str, indent: str) -> str:
    lines = doc.split("\n")
    parts = [f'"{_escape(ln)}\\n"' for ln in lines[:-1]] + [f'"{_escape(lines[-1])}"']
    if len(parts) == 1:
        return parts[0]
    inner = "".join(f"\n{indent}    {p}," for p in parts)
    return f"concat!({inner}\n{indent})"


def differing() -> tuple[list[str], list[str]]:
    """(names whose binding doc differs from the stub's, stub names with no binding site)."""
    sites = rust_sites()
    differ, missing = [], []
    for name, doc in stub_docs().items():
        site = sites.get(name)
        if site is None:
            missing.append(name)
        elif rust_doc(site) != inspect.cleandoc(doc):
            differ.append(name)
    return differ, missing


def write() -> int:
    """Copies the stub's docs over the binding's; returns how many were rewritten."""
    sites = rust_sites()
    by_file: dict[Path, list[tuple[Site, str]]] = {}
    for name, doc in stub_docs().items():
        site = sites.get(name)
        if site is not None and rust_doc(site) != inspect.cleandoc(doc):
            by_file.setdefault(site.path, []).append((site, inspect.cleandoc(doc)))
    for path, edits in by_file.items():
        literal = [e for e in edits if e[0].kind == "literal"]
        comments = [e for e in edits if e[0].kind == "comments"]
        text = path.read_text(encoding="utf-8")
        for site, doc in sorted(literal, key=lambda e: -e[0].start):
            line_start = text.rfind("\n", 0, site.start) + 1
            indent = re.match(r"\s*", text[line_start:]).group(0)
            text = text[: site.start] + _literal(doc, indent) + text[site.end :]
        lines = text.split("\n")
        for site, doc in sorted(comments, key=lambda e: -e[0].start):
            kept = [ln for ln in lines[site.start : site.end] if not ln.strip().startswith("///")]
            new = [f"{site.indent}///" + (f" {ln}" if ln else "") for ln in doc.split("\n")]
            lines[site.start : site.end] = new + kept
        path.write_text("\n".join(lines), encoding="utf-8")
    return sum(len(e) for e in by_file.values())


def main(argv: list[str]) -> int:
    if "--write" in argv:
        print(f"rewrote {write()} docs")
    differ, missing = differing()
    for name in differ:
        print(f"differs: {name}")
    for name in missing:
        print(f"no binding site: {name}")
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
