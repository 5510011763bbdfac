"""The API reference is generated from docstrings: every public name of zarrpipe must have
one that documents its parameters (`Args:`) and its return value (`Returns:`), and must be
listed in docs/api.md. Read from the installed package's stub and modules, so this checks
what users get."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import zarrpipe

PACKAGE = Path(zarrpipe.__file__).parent
API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"
# Dunder methods that are part of the documented API.
DOCUMENTED_DUNDERS = {
    "__new__", "__getitem__", "__setitem__", "__len__", "__array__", "__dlpack__",
    "__dlpack_device__",
}  # fmt: skip


def _public(name: str) -> bool:
    return not name.startswith("_") or name in DOCUMENTED_DUNDERS


def _functions(path: Path, only: set[str] | None = None):
    """(qualified name, node) of every public function and method in a module file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            if only is not None and node.name not in only:
                continue
            yield node.name, node
            if node.name in CLASS_ONLY:
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _public(item.name):
                    yield f"{node.name}.{item.name}", item
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith(
            "_"
        ):
            if only is None or node.name in only:
                yield node.name, node


def _problems(qualname: str, node: ast.AST) -> list[str]:
    doc = ast.get_docstring(node) or ""
    if not doc.strip():
        return [f"{qualname}: no docstring"]
    if isinstance(node, ast.ClassDef):
        return []
    decorators = {getattr(d, "id", getattr(d, "attr", "")) for d in node.decorator_list}
    if "property" in decorators:
        return []
    out = []
    a = node.args
    params = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    params = [p for p in params if p not in ("self", "cls")]
    if a.vararg:
        params.append("*" + a.vararg.arg)
    if a.kwarg:
        params.append("**" + a.kwarg.arg)
    if params:
        args = re.search(r"^Args:\n((?:[ \t]+.*\n?|\n)*)", doc, re.M)
        if not args:
            out.append(f"{qualname}: no Args: section for {params}")
        else:
            listed = set(re.findall(r"^\s{4}(\**\w+):", args.group(1), re.M))
            missing = [p for p in params if p not in listed]
            if missing:
                out.append(f"{qualname}: Args: does not describe {missing}")
    returns = node.returns
    returns_none = isinstance(returns, ast.Constant) and returns.value is None
    if returns is not None and not returns_none and node.name != "__new__":
        if not re.search(r"^Returns:", doc, re.M):
            out.append(f"{qualname}: no Returns: section")
    return out


# Classes documented as a whole: CodecPipeline's and NDBuffer's methods are zarr-python's
# protocol, called by zarr-python, not by users (docs/api.md shows the class without members).
CLASS_ONLY = {"CodecPipeline", "NDBuffer"}
MODULES = {
    "_zarrpipe.pyi": None,
    "engine.py": {"ArrayEngine", "array_engine"},
    "pipeline.py": {"CodecPipeline", "FallbackWarning"},
    "ndbuffer.py": {"NDBuffer"},
    "cli.py": {"main"},
    "xarray_backend.py": {"ZarrpipeBackendEntrypoint", "ZarrpipeBackendArray"},
    "ray/read.py": {"read_zarr", "ZarrDatasource"},
    "ray/sink.py": {"ZarrDatasink"},
    "loader.py": {"BatchLoader"},
    "torch.py": {"ZarrDataset", "to_torch"},
    "jax.py": {"batches", "to_jax"},
}


@pytest.mark.parametrize("module", list(MODULES))
def test_public_names_document_parameters_and_returns(module: str) -> None:
    found = list(_functions(PACKAGE / module, MODULES[module]))
    assert found, f"no public names found in {module}"
    problems = [p for name, node in found for p in _problems(name, node)]
    assert not problems, "\n".join(problems)


def test_the_checker_catches_a_missing_section() -> None:
    tree = ast.parse(
        'def f(x: int) -> int:\n    """Does f.\n\n    Args:\n        y: no.\n    """\n'
    )
    assert _problems("f", tree.body[0]) == [
        "f: Args: does not describe ['x']",
        "f: no Returns: section",
    ]


def test_every_public_name_is_in_the_api_reference() -> None:
    if not API_PAGE.is_file():
        pytest.skip("docs/api.md is not beside tests/")
    page = API_PAGE.read_text(encoding="utf-8")
    listed = set(re.findall(r"^::: zarrpipe\.(\w+)", page, re.M))
    public = [n for n in zarrpipe.__all__ if not n.startswith("_")]
    missing = [n for n in public if n not in listed]
    assert not missing, f"docs/api.md does not document {missing}"
