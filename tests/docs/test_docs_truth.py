"""The documentation says what the code does: each test here checks one kind of claim of the
README, the site (docs/), the changelog, the stubs or the command line's help against the
code, the registry or the package metadata it describes, so that a claim made stale by a
change fails the suite instead of misleading a reader.

- the `Array` docstring's selections (`_zarrpipe.pyi`) against what reads do;
- docs/reliability.md's table against the case registry of tests/support/faults/
  (`gen_reliability_table.py` renders it), and the page's test counts against pytest's;
- docs/index.md's "What it reads" is README's list (pymdownx.snippets sections);
- every codec README says zarrpipe reads is named in CHANGELOG.md;
- docs/api.md's table of where each name is imported from, against the package;
- the install sections lead with `pip install zarrpipe` and name every wheel the release builds;
- docs/install.md's and README's extras against pyproject.toml;
- `zarrpipe info`'s help against what `Store` opens;
- repository files a page cites exist.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import zarrpipe

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
STUB = ROOT / "python" / "zarrpipe" / "_zarrpipe.pyi"

if not (DOCS / "index.md").is_file():  # an installed package tested from elsewhere
    pytest.skip("the documentation is not beside tests/", allow_module_level=True)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _pages() -> list[Path]:
    """Every Markdown page a reader sees: the site's and the repository's top-level ones."""
    return sorted(DOCS.rglob("*.md")) + sorted(ROOT.glob("*.md"))


def _snippet(path: Path, section: str) -> str:
    """A pymdownx.snippets section of a file (between `--8<-- [start:x]` / `[end:x]`)."""
    text = _read(path)
    name = re.escape(section)
    m = re.search(
        rf"^[^\n]*--8<-- \[start:{name}\][^\n]*\n(.*?)^[^\n]*--8<-- \[end:{name}\]",
        text,
        re.M | re.S,
    )
    assert m, f"{path.name} has no snippet section {section!r}"
    return m.group(1)


# ---------------------------------------------------------------------------------------------
# 1. the Array docstring's selections


def _stub_docstrings(cls: str, members: tuple[str, ...]) -> dict[str, str]:
    tree = ast.parse(_read(STUB))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    out = {cls: ast.get_docstring(node) or ""}
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in members:
            out[f"{cls}.{item.name}"] = ast.get_docstring(item) or ""
    return out


SELECTION_DOCS = {
    **_stub_docstrings(
        "Array", ("__getitem__", "__setitem__", "read", "read_into", "write", "read_async")
    ),
    **_stub_docstrings("Store", ("read", "write", "read_into")),
}
# Phrasings that say a selection kind zarrpipe reads is refused (what the docstring said
# before steps, None, index arrays and masks were read).
REFUSALS = [
    r"step other than 1",
    r"only (integers|step-1)",
    r"(lists|index arrays|integer arrays|masks|`None` inside a selection)[^.;]*\b(is|are) an? "
    r"`?(IndexError|TypeError)",
    r"basic indexing with step 1",
]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("sel")
    store = zarrpipe.Store(str(root / "s.zarr"))
    arr = store.create_array("a", shape=(8, 9), dtype="int32", chunks=(3, 4))
    data = np.arange(72, dtype="int32").reshape(8, 9)
    arr[...] = data
    return arr, data


def test_every_selection_kind_the_array_docstring_names_reads_as_numpy(sample):
    arr, data = sample
    mask = data % 3 == 0
    kinds = {
        "a step of 2": (slice(None, None, 2), slice(1, None, 3)),
        "a negative step": (slice(None, None, -1),),
        "None": (None, 2),
        "an integer list": ([3, 0, 3],),
        "an integer array": (np.array([[1, 2], [7, 0]]), slice(2, 5)),
        "a boolean mask": (mask,),
        "a boolean mask along an axis": (slice(None), mask[0]),
    }
    for what, sel in kinds.items():
        np.testing.assert_array_equal(np.asarray(arr[sel]), data[sel], err_msg=what)
    np.testing.assert_array_equal(np.asarray(arr.oindex[[3, 1], ::2]), data[[3, 1]][:, ::2])
    np.testing.assert_array_equal(np.asarray(arr.vindex[[1, 2], [3, 4]]), data[[1, 2], [3, 4]])
    np.testing.assert_array_equal(np.asarray(arr.blocks[1, 1:3]), data[3:6, 4:9])
    doc = SELECTION_DOCS["Array"]
    for name in ("oindex", "vindex", "blocks", "any step", "integer arrays", "boolean masks"):
        assert name in doc, f"the Array docstring does not mention {name!r}"


def test_no_docstring_says_a_selection_that_reads_is_refused():
    stale = [
        f"{where}: {m.group(0)!r}"
        for where, doc in SELECTION_DOCS.items()
        for pattern in REFUSALS
        for m in [re.search(pattern, " ".join(doc.split()))]
        if m
    ]
    assert not stale, "selections read now, the docstrings say they raise:\n" + "\n".join(stale)


# The invalid selections the Array docstring lists, with the exception it names for each.
INVALID = [
    ((8, 0), IndexError, "an index out of range"),
    ((0, 0, 0), IndexError, "too many indices"),
    ((Ellipsis, Ellipsis), IndexError, "a second `...`"),
    ((1.5,), IndexError, "an item that is no index (a float"),
    (("a",), IndexError, "a string)"),
    (([0, 1], [0, 1, 2]), IndexError, "index arrays that do not broadcast"),
    ((slice(None, None, 0),), ValueError, "`ValueError` for a slice step\nof 0"),
    ((slice(1.5, None),), TypeError, "`TypeError` for slice bounds that are not integers"),
]


@pytest.mark.parametrize("sel, error, said", INVALID, ids=[i[2][:24] for i in INVALID])
def test_the_invalid_selections_the_array_docstring_lists_raise_what_it_says(
    sample, sel, error, said
):
    arr, data = sample
    assert " ".join(said.split()) in " ".join(SELECTION_DOCS["Array"].split())
    with pytest.raises(error):
        arr[sel]
    with pytest.raises(error):  # NumPy's exception, as the docstring says
        data[sel]


# ---------------------------------------------------------------------------------------------
# 2. docs/reliability.md


def test_reliability_table_is_the_case_registry():
    """The table between the page's markers is what gen_reliability_table.py renders from
    the registry (names, sections, order, descriptions, expected outcomes), with the page's
    observed cells; and no observed zarrpipe cell contradicts its expected outcome."""
    from support import gen_reliability_table as gen
    from support.faults.registry import CASES

    table = gen.table_of(_read(gen.PAGE))
    listed = gen.table_names(table)
    registry = [c.name for _, cases in gen.sections() for c in cases]
    missing = [n for n in registry if n not in listed]
    extra = [n for n in listed if n not in CASES]
    assert not missing and not extra, (
        f"docs/reliability.md's table is not the registry: cases missing from the page "
        f"{missing}, rows that are no case {extra}; run "
        "tests/support/gen_reliability_table.py --write (with the new case names to observe "
        "only those)"
    )
    cells = gen.page_cells(table)
    want = gen.render(cells)
    if table != want:
        diff = [
            f"page: {a}\nregistry: {b}"
            for a, b in zip(table.splitlines(), want.splitlines(), strict=False)
            if a != b
        ]
        pytest.fail(
            "docs/reliability.md's table differs from the registry (run "
            "tests/support/gen_reliability_table.py --write):\n" + "\n".join(diff[:5])
        )
    problems = gen.contradictions(cells)
    assert not problems, "observed zarrpipe cells contradict the registry:\n" + "\n".join(problems)


def test_the_table_check_catches_a_changed_row():
    from support import gen_reliability_table as gen

    table = gen.table_of(_read(gen.PAGE))
    cells = gen.page_cells(table)
    name = next(iter(cells))
    zp, zr = cells[name]
    assert gen.render(cells) == table
    assert gen.render({**cells, name: ("**wrong value**", zr)}) != table
    assert gen.contradictions({name: ("**wrong value**", zr)})
    assert gen.contradictions({"sel-float": ("TypeError: `x`", zr)})
    assert not gen.contradictions({name: (zp, zr)})


def test_reliability_suite_counts_are_what_pytest_collects():
    """The page's "The suite" table gives each test file's number of tests."""
    page = _read(DOCS / "reliability.md")
    claimed = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^\| `tests/(\w+/test_\w+\.py)` \| (\d+)\b", page, re.M)
    }
    assert claimed, "no test counts found in docs/reliability.md's suite table"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *claimed],
        cwd=ROOT / "tests", capture_output=True, text=True, timeout=300,
    ).stdout  # fmt: skip
    counted = {
        f: sum(1 for ln in out.splitlines() if re.match(rf"(tests/)?{re.escape(f)}::", ln))
        for f in claimed
    }
    assert counted == claimed, f"collected {counted}, docs/reliability.md says {claimed}"


# ---------------------------------------------------------------------------------------------
# 3. docs/index.md's "What it reads" is README's


def test_index_what_it_reads_is_the_readme_list():
    index = _read(DOCS / "index.md")
    section = index.split("## What it reads", 1)[-1]
    assert "## What it reads" in index, "docs/index.md has no 'What it reads' section"
    for name in ("reads", "data-types"):
        assert f'--8<-- "README.md:{name}"' in section, (
            f"docs/index.md's 'What it reads' must include README.md's {name!r} section "
            f'(--8<-- "README.md:{name}"), not a list of its own'
        )
        assert _snippet(ROOT / "README.md", name).strip()
    # nothing else in the section lists codecs or data types
    own = re.sub(r'--8<-- "[^"]+"|<!--.*?-->', "", section, flags=re.S)
    listed = [c for c in _readme_codecs() if f"`{c}`" in own]
    assert not listed, f"docs/index.md lists codecs beside README's list: {listed}"


# ---------------------------------------------------------------------------------------------
# 4. codecs README reads are in the changelog


def _readme_codecs() -> list[str]:
    """The codec names of README's "reads" list (its bullets on Zarr v3, Zarr v2, both)."""
    names: list[str] = []
    for bullet in re.split(r"^- ", _snippet(ROOT / "README.md", "reads"), flags=re.M):
        if re.match(r"\*\*(Zarr v3|Zarr v2|Both)", bullet):
            names += [n for n in re.findall(r"`([^`]+)`", bullet) if "." not in n]
    return names


def test_every_codec_readme_reads_is_in_the_changelog():
    codecs = _readme_codecs()
    assert len(codecs) > 15, f"README's codec list did not parse: {codecs}"
    changelog = _read(ROOT / "CHANGELOG.md")
    missing = [c for c in codecs if f"`{c}`" not in changelog]
    assert not missing, f"README says zarrpipe reads {missing}; CHANGELOG.md never names them"


# ---------------------------------------------------------------------------------------------
# 5. where docs/api.md says each name is imported from


def _import_table(page: str) -> dict[str, list[str]]:
    rows = re.findall(r"^\| `(zarrpipe[\w.]*)` \| (.+) \|$", page, re.M)
    return {module: re.findall(r"`(\w+)`", names) for module, names in rows}


def _has(module: str, name: str) -> bool:
    """`from module import name` works (framework modules without their framework: the
    module file defines it)."""
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        path = ROOT / "python" / Path(*module.split(".")).with_suffix(".py")
        tree = ast.parse(_read(path))
        return any(getattr(n, "name", None) == name for n in tree.body)


def test_api_reference_says_where_each_name_is_imported_from():
    page = _read(DOCS / "api.md")
    table = _import_table(page)
    assert table.get("zarrpipe"), "docs/api.md has no table of what is imported from where"
    wrong = [f"{m}.{n}" for m, names in table.items() for n in names if not _has(m, n)]
    assert not wrong, f"docs/api.md says these import, they do not: {wrong}"
    top = set(table["zarrpipe"])
    assert top <= set(dir(zarrpipe)) | {"CodecPipeline", "FallbackWarning", "NDBuffer"}
    for name in top:  # `from zarrpipe import name`, lazy names included
        exec(f"from zarrpipe import {name}", {})
    # every documented object is in the table, under the module it is documented from;
    # what does not import from zarrpipe itself is headed with its full path
    problems = []
    for m in re.finditer(r"^::: (zarrpipe[\w.]*)\n((?:    .*\n|\n)*)", page, re.M):
        target, options = m.group(1), m.group(2)
        members = re.search(r"members: \[([^\]]*)\]", options)
        if members:  # a module shown with some of its members
            module, names = target, [x.strip() for x in members.group(1).split(",")]
        else:
            module, _, name = target.rpartition(".")
            names = [name]
        for name in names:
            if name not in table.get(module, []) and not (name in top and _has("zarrpipe", name)):
                problems.append(f"{module}.{name} is not in the table under {module}")
            full_path = "show_root_full_path: true" in options
            if name not in top and not full_path:
                problems.append(f"::: {target} is headed as if `from zarrpipe import {name}`")
    assert not problems, "\n".join(problems)
    claims_all = re.search(
        r"(?<!Not )\b[Ee]verything (here|below) is importable from `zarrpipe`", page
    )
    assert not claims_all or all(n in top for ns in table.values() for n in ns)


# ---------------------------------------------------------------------------------------------
# 6. install: the pages lead with `pip install zarrpipe` and name the wheels the release builds

RELEASE_WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
# The wheel tag each release target gets (.ci/build-wheel; macOS: Rust's minimum versions).
TAG_OF_TARGET = {
    "x86_64-unknown-linux-gnu": "manylinux_2_17_x86_64",
    "aarch64-unknown-linux-gnu": "manylinux_2_17_aarch64",
    "x86_64-unknown-linux-musl": "musllinux_1_2_x86_64",
    "aarch64-apple-darwin": "macosx_11_0_arm64",
    "x86_64-apple-darwin": "macosx_10_12_x86_64",
    "x86_64-pc-windows-msvc": "win_amd64",
}


def _install_sections() -> dict[str, str]:
    readme = _read(ROOT / "README.md").split("## Install\n", 1)[1].split("\n## ", 1)[0]
    return {"README.md": readme, "docs/install.md": _read(DOCS / "install.md")}


def test_install_sections_lead_with_pip_and_name_every_released_wheel():
    built = set(
        re.findall(
            r"\b[\w]+-(?:unknown-linux-(?:gnu|musl)|apple-darwin|pc-windows-msvc)\b",
            _read(RELEASE_WORKFLOW),
        )
    )
    assert built == set(TAG_OF_TARGET), f"the workflow builds {sorted(built)}"
    for page, section in _install_sections().items():
        first = re.search(r"```sh\n(.*)\n", section)
        assert first and first.group(1).split("#")[0].strip() == "pip install zarrpipe", (
            f"{page}'s install section should lead with `pip install zarrpipe`"
        )
        missing = [tag for tag in TAG_OF_TARGET.values() if f"`{tag}`" not in section]
        assert not missing, f"{page} does not name the wheels {missing}"
        assert "pip install ." in section and "maturin build" in section, (
            f"{page} should still say how to build from a checkout"
        )


# ---------------------------------------------------------------------------------------------
# 7. the extras


def _extras() -> dict[str, set[str]]:
    """pyproject.toml's extras: {extra: project names (another extra of zarrpipe by its name)}."""
    groups = tomllib.loads(_read(ROOT / "pyproject.toml"))["project"]["optional-dependencies"]
    out = {}
    for extra, reqs in groups.items():
        names = set()
        for req in reqs:
            own = re.fullmatch(r"zarrpipe\[([\w,\s-]+)\]", req)
            if own:
                names |= {e.strip() for e in own.group(1).split(",")}
            else:
                names.add(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req).group(0).lower())
        out[extra] = names
    return out


def test_install_page_lists_pyprojects_extras():
    page = _read(DOCS / "install.md")
    rows = {
        m.group(1): set(re.findall(r"`([^`]+)`", m.group(2)))
        for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \|", page, re.M)
    }
    extras = _extras()
    assert set(rows) == set(extras), (
        f"docs/install.md's extras {sorted(rows)}, pyproject.toml's {sorted(extras)}"
    )
    wrong = {
        extra: {
            "page only": sorted(rows[extra] - want),
            "pyproject only": sorted(want - rows[extra]),
        }
        for extra, want in extras.items()
        if rows[extra] != want
    }
    assert not wrong, f"docs/install.md's extras differ from pyproject.toml: {wrong}"


def test_readme_names_every_extra():
    section = _read(ROOT / "README.md").split("## Install", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"(?:\.|zarrpipe)\[(\w+)\]", section))
    assert named == set(_extras()), (
        f"README's extras {sorted(named)}, pyproject's {sorted(_extras())}"
    )


# ---------------------------------------------------------------------------------------------
# 8. `zarrpipe info` opens what Store opens


def test_info_help_names_the_stores_it_opens():
    from zarrpipe import cli

    sub = next(a for a in cli._parser()._actions if a.dest == "command")
    store_arg = next(a for a in sub.choices["info"]._actions if a.dest == "store")
    helptext = store_arg.help or ""
    for scheme in ("s3://", "gs://", "az://", "file://"):
        assert scheme in helptext, f"`zarrpipe info`'s help does not say it opens {scheme} URLs"
    assert "local" not in re.sub(r"a local directory", "", helptext), helptext
    assert "local store" not in " ".join((cli.main.__doc__ or "").split())


# ---------------------------------------------------------------------------------------------
# 9. files the pages cite exist

CITED = re.compile(r"`((?:codecs|src|python|tests|benches|docs|\.ci)/[\w./-]*)`")
DOC_NAME = re.compile(r"\b([A-Z][A-Z0-9_-]{2,}(?:\.md)?)(?= §|\.md\b)")


def _missing_citations(page: Path) -> list[str]:
    text = _read(page)
    out = []
    for m in CITED.finditer(text):
        path = m.group(1).rstrip(".")
        if "*" not in path and "<" not in path and not (ROOT / path).exists():
            out.append(path)
    for m in DOC_NAME.finditer(text):
        name = m.group(1) if m.group(1).endswith(".md") else m.group(1) + ".md"
        if not (ROOT / name).exists() and not (DOCS / name).exists():
            out.append(name)
    return [f"{page.relative_to(ROOT)}: {p}" for p in out]


def test_pages_cite_files_that_exist():
    missing = [x for p in _pages() for x in _missing_citations(p)]
    assert not missing, "pages cite files the repository does not have:\n" + "\n".join(missing)
