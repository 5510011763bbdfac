"""Docstrings are written once: the stub (`python/zarrpipe/_zarrpipe.pyi`) documents the
compiled module, and the binding's `///` comments — the runtime `__doc__` that `help()` and
IPython show — are copies of it, made by `python tests/support/stub_docs.py --write`."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import zarrpipe._zarrpipe as compiled
from support import stub_docs


def test_every_documented_name_of_the_stub_has_its_doc_in_the_binding() -> None:
    differ, missing = stub_docs.differing()
    assert not missing, f"stub names with no binding item found: {missing}"
    assert not differ, (
        "the binding's docs differ from the stub's (run `python tests/support/stub_docs.py "
        f"--write`): {differ}"
    )


def _runtime(name: str) -> object:
    obj: object = compiled
    for part in name.split("."):
        obj = inspect.getattr_static(obj, part) if isinstance(obj, type) else getattr(obj, part)
    return obj


@pytest.mark.parametrize("name", sorted(stub_docs.stub_docs()))
def test_runtime_docs_are_the_stubs(name: str) -> None:
    """What `help()` shows in the installed module is the stub's text."""
    obj = _runtime(name)
    if isinstance(obj, staticmethod | classmethod):
        obj = obj.__func__
    doc = getattr(obj, "__doc__", None)
    assert doc is not None, f"{name} has no __doc__ at run time"
    assert inspect.cleandoc(doc) == inspect.cleandoc(stub_docs.stub_docs()[name])


def test_the_check_sees_a_changed_doc(tmp_path: Path) -> None:
    """A binding doc edited by hand no longer matches."""
    sites = stub_docs.rust_sites()
    site = sites["Store.read"]
    copy = tmp_path / site.path.name
    lines = site.path.read_text(encoding="utf-8").split("\n")
    doc_line = next(i for i in range(site.start, site.end) if lines[i].strip().startswith("///"))
    lines[doc_line] += " (edited)"
    copy.write_text("\n".join(lines), encoding="utf-8")
    edited = stub_docs.Site(copy, site.kind, site.start, site.end, site.indent)
    assert stub_docs.rust_doc(edited) != stub_docs.rust_doc(site)
    assert stub_docs.rust_doc(site) == inspect.cleandoc(stub_docs.stub_docs()["Store.read"])
