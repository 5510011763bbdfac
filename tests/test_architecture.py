"""The tree keeps the shape docs/architecture.md gives it: engine modules whose dependencies
point one way (the page's graph is the code's), small files, and citations of files that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from module_graph import cycles, graph, render

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
CODE_LINES_AT_MOST = 600


def _page_graph(name: str) -> str:
    text = PAGE.read_text()
    start = f"<!-- module-graph:{name}:start -->"
    end = f"<!-- module-graph:{name}:end -->"
    block = text.split(start, 1)[1].split(end, 1)[0]
    return block.strip().removeprefix("```text").removesuffix("```").strip()


@pytest.mark.parametrize("crate", ["codecs/src", "src"])
def test_modules_depend_one_way(crate: str) -> None:
    assert cycles(graph(ROOT / crate)) == []


def test_the_page_shows_the_engines_graph() -> None:
    assert _page_graph("codecs") == render(graph(ROOT / "codecs" / "src")), (
        "docs/architecture.md's module graph is not the code's: paste the output of "
        "`python tests/module_graph.py codecs/src` between its markers"
    )


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _rust_files() -> list[Path]:
    return sorted([*(ROOT / "codecs" / "src").rglob("*.rs"), *(ROOT / "src").rglob("*.rs")])


@pytest.mark.parametrize("path", _rust_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_rust_file_is_long(path: Path) -> None:
    code = path.read_text().split("#[cfg(test)]")[0]
    assert code.count("\n") <= CODE_LINES_AT_MOST, (
        f"{path.relative_to(ROOT)} has over {CODE_LINES_AT_MOST} lines before its tests: split it"
    )


_CITED = re.compile(r"\b((?:docs|benches|tests|codecs|src|python)/[\w./-]+\.(?:md|rs|py))\b")
_SOURCES = [
    *(ROOT / "codecs" / "src").rglob("*.rs"),
    *(ROOT / "src").rglob("*.rs"),
    *(ROOT / "python" / "zarrpipe").rglob("*.py"),
    *(ROOT / "python" / "zarrpipe").rglob("*.pyi"),
]


def test_code_cites_only_files_that_exist() -> None:
    """Source comments (the pages have their own check in test_docs_truth.py)."""
    missing = []
    for path in _SOURCES:
        text = path.read_text()
        for gone in ("DESIGN.md", "ZARRS-NOTES"):
            if gone in text:
                missing.append(f"{path.relative_to(ROOT)} cites {gone} (not in the repository)")
        for cited in _CITED.findall(text):
            target = cited.rstrip(".")
            if not (ROOT / target).exists() and not (ROOT / "codecs" / target).exists():
                missing.append(f"{path.relative_to(ROOT)} cites {target}")
    assert missing == []


def test_the_binding_imports_nothing_of_the_package_above_it() -> None:
    """`src/` is below `python/zarrpipe/`: it may call NumPy or zarr-python, never zarrpipe."""
    found = []
    for path in sorted((ROOT / "src").rglob("*.rs")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"import\(\s*\"zarrpipe", line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []
