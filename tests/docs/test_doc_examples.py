"""Runs every code example of the documentation (README.md and docs/**/*.md) and checks the
output each one shows, so that an example that stops working fails the suite.

What runs, per page, in order, in one namespace and a fresh working directory per page:

- a ```python block is executed; one that starts with ``>>>`` is run as a doctest;
- a ```text block right after a ```python block is the output that block must print;
- a ```console block holds ``$ zarrpipe ...`` / ``$ python -m zarrpipe ...`` commands, each
  followed by the output it must print; they run with this interpreter;
- other fences (``sh``, ``toml``, diagrams...) are not examples and are not run.

An HTML comment on the line right before a fence says how to run it:

- ``<!-- example: skip REASON -->``: not run; the test is skipped with REASON;
- ``<!-- example: requires MODULE -->``: skipped when MODULE cannot be imported (torch, jax);
- ``<!-- example: s3 -->``: runs against the local S3 server the tests start (moto): the
  address ``http://127.0.0.1:9000`` in the block is replaced by the server's, the bucket
  ``zarrpipe-docs`` exists and the environment holds its credentials.
"""

from __future__ import annotations

import contextlib
import copy
import doctest
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC_ADDRESS = "http://127.0.0.1:9000"
DOC_BUCKET = "zarrpipe-docs"

_FENCE = re.compile(r"^(`{3,})([\w+-]*)\s*$")
_MARKER = re.compile(r"^<!--\s*example:\s*(\w+)\s*(.*?)\s*-->\s*$")


@dataclass
class Example:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    source: str
    expected: str | None = None  # the ```text block that follows a python block
    marker: tuple[str, str] | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def parse(page: Path) -> list[Example]:
    """The fenced blocks of a Markdown page, with their markers and shown output."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Example] = []
    previous_end = -2  # line index just after the last block's closing fence
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2), i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != fence:
            j += 1
        if j == len(lines):
            raise ValueError(f"{page}:{start + 1}: unclosed code fence")
        source = "\n".join(lines[start + 1 : j]) + "\n"
        marker = None
        if start > 0:
            mm = _MARKER.match(lines[start - 1].strip())
            if mm:
                marker = (mm.group(1), mm.group(2))
        between_blank = all(not line.strip() for line in lines[previous_end:start])
        if lang == "text" and blocks and blocks[-1].lang == "python" and between_blank:
            blocks[-1].expected = source
        else:
            blocks.append(Example(page, start + 1, lang, source, marker=marker))
        previous_end = j + 1
        i = j + 1
    return blocks


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def examples() -> list[Example]:
    return [e for page in pages() for e in parse(page) if e.lang in ("python", "console")]


@dataclass
class PageState:
    namespace: dict[str, Any] = field(default_factory=dict)
    directory: Path | None = None
    failed: str | None = None
    zarr_config: dict[str, Any] | None = None


@contextlib.contextmanager
def _isolated(state: PageState):
    """Process-wide settings a page changes (zarr's config, zarrpipe's thread count) last
    for that page's examples only, not for the rest of the test session."""
    import zarrpipe

    threads = zarrpipe.get_num_threads()
    zarr = sys.modules.get("zarr")
    original = copy.deepcopy(zarr.config.config) if zarr is not None else None
    if zarr is not None and state.zarr_config is not None:
        zarr.config.config = copy.deepcopy(state.zarr_config)
    try:
        yield
    finally:
        zarrpipe.set_num_threads(threads)
        zarr = sys.modules.get("zarr")
        if zarr is not None:
            state.zarr_config = copy.deepcopy(zarr.config.config)
            if original is not None:
                zarr.config.config = original
            else:  # imported by this example: back to zarr's defaults
                zarr.config.refresh()


_STATE: dict[Path, PageState] = {}


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _run_python(example: Example, source: str, namespace: dict[str, Any]) -> str:
    """Runs a block, returning what it printed; raises what it raised."""
    out = io.StringIO()
    if source.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(
            source, namespace, example.where, str(example.page), example.line
        )
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        report = io.StringIO()
        result = runner.run(test, out=report.write, clear_globs=False)
        if result.failed:
            raise AssertionError(f"doctest failed at {example.where}:\n{report.getvalue()}")
        return ""
    # Padded so that tracebacks show the page's own lines, with their line numbers.
    code = compile("\n" * example.line + source, str(example.page), "exec")
    with contextlib.redirect_stdout(out):
        exec(code, namespace)
    return out.getvalue()


def _run_console(example: Example) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in example.source.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"{example.where}: output before any '$ ' command")
    for command, shown in commands:
        argv = shlex.split(command, comments=True)
        if argv[:3] == ["python", "-m", "zarrpipe"]:
            argv = [sys.executable, *argv[1:]]
        elif argv[:1] == ["zarrpipe"]:
            argv = [sys.executable, "-m", "zarrpipe", *argv[1:]]
        else:
            raise AssertionError(f"{example.where}: only zarrpipe commands run, not {command!r}")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        printed = done.stdout + done.stderr
        assert _normalise(printed) == _normalise("\n".join(shown)), (
            f"{example.where}: `{command}` printed (exit {done.returncode}):\n{printed}\n"
            f"the page shows:\n" + "\n".join(shown)
        )


@pytest.fixture(scope="module")
def s3_endpoint():
    from support.remote_servers import moto_s3

    boto3 = pytest.importorskip("boto3")
    with moto_s3() as endpoint:
        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        s3.create_bucket(Bucket=DOC_BUCKET)
        yield endpoint


_EXAMPLES = examples()


@pytest.mark.skipif(not _EXAMPLES, reason="the documentation is not beside tests/")
@pytest.mark.parametrize("example", _EXAMPLES, ids=[e.where for e in _EXAMPLES])
def test_example(example: Example, request, tmp_path_factory, monkeypatch) -> None:
    state = _STATE.setdefault(example.page, PageState())
    if state.directory is None:
        state.directory = tmp_path_factory.mktemp(example.page.stem)
    monkeypatch.chdir(state.directory)
    source = example.source
    kind, arg = example.marker or ("", "")
    if kind == "skip":
        pytest.skip(f"{example.where}: {arg}")
    elif kind == "requires":
        if importlib.util.find_spec(arg) is None:
            pytest.skip(f"{example.where}: needs {arg}, which is not installed")
    elif kind == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        source = source.replace(DOC_ADDRESS, endpoint)
        for k, v in [("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                     ("AWS_REGION", "us-east-1")]:  # fmt: skip
            monkeypatch.setenv(k, v)
    elif example.marker is not None:
        raise AssertionError(f"{example.where}: unknown example marker {kind!r}")
    if state.failed is not None:
        pytest.skip(f"an earlier example on this page failed ({state.failed})")
    try:
        if example.lang == "console":
            _run_console(example)
            return
        with _isolated(state):
            printed = _run_python(example, source, state.namespace)
        if example.expected is not None:
            assert _normalise(printed) == _normalise(example.expected), (
                f"{example.where} printed:\n{printed}\nthe page shows:\n{example.expected}"
            )
    except BaseException:
        state.failed = example.where
        raise


def test_the_parser_pairs_output_and_reads_markers(tmp_path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```python\nprint(1)\n```\n\n```text\n1\n```\n\n"
        "<!-- example: skip needs a cluster -->\n```python\nboom()\n```\n\n"
        "```sh\nls\n```\n\n```text\nnot output\n```\n"
    )
    blocks = parse(page)
    assert [(b.lang, b.line) for b in blocks] == [("python", 3), ("python", 12), ("sh", 16),
                                                  ("text", 20)]  # fmt: skip
    assert blocks[0].expected == "1\n"
    assert blocks[1].marker == ("skip", "needs a cluster")
    assert blocks[2].expected is None


def test_every_page_with_examples_is_found() -> None:
    if not (ROOT / "docs").is_dir():
        pytest.skip("the documentation is not beside tests/")
    with_examples = {e.page.relative_to(ROOT).as_posix() for e in _EXAMPLES}
    assert "README.md" in with_examples
    assert any(p.startswith("docs/") for p in with_examples)
    # No example hides behind a fence label the runner ignores.
    for page in pages():
        for block in parse(page):
            assert block.lang not in ("py", "python3", "pycon"), (
                f"{block.where}: label Python examples ```python so that they run"
            )


def test_examples_leave_process_settings_alone() -> None:
    # Runs after the examples (pytest keeps file order): the zarr-python page and the
    # README switch zarr to zarrpipe's pipeline and the reading page resizes the pool; the
    # rest of the suite must still see zarr's own pipeline and the default pool.
    zarr = pytest.importorskip("zarr")
    import zarrpipe

    default = zarr.config.defaults[0]["codec_pipeline"]["path"]
    assert zarr.config.get("codec_pipeline.path") == default
    assert zarrpipe.get_num_threads() == int(
        os.environ.get("ZARRPIPE_NUM_THREADS") or os.cpu_count() or 1
    )
