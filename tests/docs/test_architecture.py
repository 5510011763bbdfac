"""The tree keeps the shape docs/architecture.md gives it: engine modules whose dependencies
point one way (the page's graph is the code's), small files, and citations of files that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.module_graph import (
    CODE_LINES_AT_MOST,
    code_lines,
    cycles,
    graph,
    outside_tests,
    render,
)

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"


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
        "`python tests/support/module_graph.py codecs/src` between its markers"
    )


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _rust_files() -> list[Path]:
    return sorted([*(ROOT / "codecs" / "src").rglob("*.rs"), *(ROOT / "src").rglob("*.rs")])


# Files over the cap that are not split yet, and why. Strict: once a file is under the cap,
# its entry must go (the test then fails as "XPASS").
_LONG_FOR_NOW: dict[str, str] = {}


def _rust_file_params() -> list:
    params = []
    for path in _rust_files():
        name = str(path.relative_to(ROOT))
        reason = _LONG_FOR_NOW.get(name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(path, id=name, marks=marks))
    return params


@pytest.mark.parametrize("path", _rust_file_params())
def test_no_rust_file_is_long(path: Path) -> None:
    """Every line outside `#[cfg(test)] mod … { … }` counts, wherever the tests sit."""
    lines = code_lines(path.read_text())
    assert lines <= CODE_LINES_AT_MOST, (
        f"{path.relative_to(ROOT)} has {lines} lines outside its test module, over "
        f"{CODE_LINES_AT_MOST}: move a concern to a sibling file"
    )


def test_the_length_counts_code_after_a_test_only_item() -> None:
    text = (
        "fn a() {}\n"
        "#[cfg(test)]\n"
        "fn only_in_tests() {}\n"
        "#[cfg(test)]\n"
        "// a comment and an attribute before the module count as code\n"
        "#[allow(dead_code)]\n"
        "mod tests {\n"
        '    const OPEN: &str = "{ {";\n'
        '    const RAW: &str = r#"}"#;\n'
        "    const BRACE: char = '}';\n"
        "    /* } /* nested } */ */\n"
        "    fn f<'a>(x: &'a str) -> &'a str { x } // }\n"
        "}\n"
        "fn after_the_tests() {}\n"
        "#[cfg(test)]\n"
        "mod more;\n"
        "fn last() {}\n"
    )
    assert outside_tests(text) == (
        "fn a() {}\n"
        "#[cfg(test)]\n"
        "fn only_in_tests() {}\n"
        "#[cfg(test)]\n"
        "// a comment and an attribute before the module count as code\n"
        "#[allow(dead_code)]\n"
        "fn after_the_tests() {}\n"
        "#[cfg(test)]\n"
        "mod more;\n"
        "fn last() {}\n"
    )
    assert code_lines(text) == 10


# A cited file (`src/store/mod.rs`) or folder (`src/codec/plugins/`).
_CITED = re.compile(
    r"(?<![\w/.:-])((?:docs|benches|tests|codecs|src|python)/(?:[\w./-]+\.(?:md|rs|py)\b"
    r"|(?:[\w.-]+/)+))"
)
_SOURCES = [
    *(ROOT / "codecs" / "src").rglob("*.rs"),
    *(ROOT / "codecs" / "tests").rglob("*.rs"),
    *(ROOT / "codecs" / "benches").rglob("*.rs"),
    *(ROOT / "src").rglob("*.rs"),
    *(ROOT / "python" / "zarrpipe").rglob("*.py"),
    *(ROOT / "python" / "zarrpipe").rglob("*.pyi"),
    *(ROOT / "benches").rglob("*.py"),
    # The tests' docstrings and comments: not this file's examples of stale paths, nor
    # tests/zarr_suite/, which names zarr-python's own test files.
    *(
        p
        for p in (ROOT / "tests").rglob("*.py")
        if p != Path(__file__).resolve() and "zarr_suite" not in p.parts
    ),
]


def test_code_cites_only_files_that_exist() -> None:
    """Comments and docstrings of the code, its tests and benchmarks (the pages have their own
    check in test_docs_truth.py)."""
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


# In a manifest's comments: a path with a directory (`src/codec/decode/`, `store/file_os.rs`)
# or a root page (`RELEASING.md`); not a URL, not `and/or`.
_CARGO_CITED = re.compile(
    r"(?<![\w/.:-])((?:[\w-]+/)+(?:[\w.-]+\.(?:rs|md|py|toml|yml))?|[A-Z][A-Z_-]+\.md)(?![\w/])"
)
_MANIFESTS = sorted(p for p in ROOT.rglob("Cargo.toml") if "target" not in p.parts)


def _manifest_citations(text: str) -> list[str]:
    comments = [line.split("#", 1)[1] for line in text.splitlines() if "#" in line]
    return [cited.rstrip(".") for c in comments for cited in _CARGO_CITED.findall(c)]


@pytest.mark.parametrize("manifest", _MANIFESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_manifests_cite_only_files_that_exist(manifest: Path) -> None:
    """A path in a Cargo.toml comment is the crate's (`src/…`), its source tree's (`store/…`)
    or the repository's (`docs/…`)."""
    bases = (manifest.parent, manifest.parent / "src", ROOT)
    missing = [
        cited
        for cited in _manifest_citations(manifest.read_text())
        if not any((base / cited).exists() for base in bases)
    ]
    assert not missing, (
        f"{manifest.relative_to(ROOT)}'s comments cite paths that are not there: "
        + (", ".join(missing))
    )


def test_the_manifest_check_finds_paths_in_comments() -> None:
    text = (
        'zarrs = "1"  # see src/decode/ and plugins/zfp/, for bytes/s\n'
        "# madvise (src/buffer.rs); and/or https://example.com/a/b.rs; RELEASING.md.\n"
        'path = "not/a/comment.rs"\n'
    )
    assert _manifest_citations(text) == [
        "src/decode/",
        "plugins/zfp/",
        "src/buffer.rs",
        "RELEASING.md",
    ]


def test_the_binding_imports_nothing_of_the_package_above_it() -> None:
    """`src/` is below `python/zarrpipe/`: it may call NumPy or zarr-python, never zarrpipe."""
    found = []
    for path in sorted((ROOT / "src").rglob("*.rs")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"import\(\s*\"zarrpipe", line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []
