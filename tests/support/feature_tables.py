"""The engine's feature tables as its source defines them, read without building anything: the
codec plugins `codec/plugins/mod.rs` registers, and the store modes `store/open_mode.rs`
parses. tests/docs/test_guards_see_losses.py checks them against what the tests exercise, and
deletes entries from the source text to show that check failing; tests/support/mutate_engine.py
deletes them from a copy of the code and runs the engine's own tests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from support.module_graph import inside_tests

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "codecs" / "src" / "codec" / "plugins" / "mod.rs"
OPEN_MODE = ROOT / "codecs" / "src" / "store" / "open_mode.rs"

# `register(&["v3 name", ...], &["v2 id", ...], module::create)`, over any line breaks.
_REGISTER = re.compile(
    r"^[ \t]*register\(\s*&\[(?P<names>[^\]]*)\],\s*&\[(?P<ids>[^\]]*)\],\s*"
    r"(?P<create>[\w:]+),?\s*\);[ \t]*\n",
    re.MULTILINE,
)
_STRING = re.compile(r'"([^"\\]*)"')
# One arm of `Mode::parse`'s match: `"w-" | "x" => Self::WriteNew,`
_MODE_ARM = re.compile(
    r'^[ \t]*(?P<names>"[^"]*"(?:\s*\|\s*"[^"]*")*)\s*=>\s*Self::(?P<mode>\w+),[ \t]*\n',
    re.MULTILINE,
)


@dataclass(frozen=True)
class Registration:
    """One `register(...)` call: the plugin (its `create` function) and the names it takes."""

    create: str
    names: tuple[str, ...]  # v3
    ids: tuple[str, ...]  # v2
    span: tuple[int, int]  # where the call is in the source, for deleting it


def _install_body(source: str) -> tuple[int, str]:
    """Where `fn install()` starts, and the text from there to the next top-level `fn`."""
    start = source.index("fn install()")
    end = source.find("\nfn ", start)
    return start, source[start : len(source) if end < 0 else end]


def registrations(source: str) -> list[Registration]:
    """The plugins `install()` registers, in order."""
    offset, body = _install_body(source)
    return [
        Registration(
            create=m["create"],
            names=tuple(_STRING.findall(m["names"])),
            ids=tuple(_STRING.findall(m["ids"])),
            span=(offset + m.start(), offset + m.end()),
        )
        for m in _REGISTER.finditer(body)
    ]


def without_registration(source: str, create: str) -> str:
    """The source with the `register(...)` call of plugin `create` deleted."""
    (found,) = [r for r in registrations(source) if r.create == create]
    return source[: found.span[0]] + source[found.span[1] :]


def _parse_body(source: str) -> tuple[int, str]:
    """`Mode::parse`'s body: from `pub fn parse` to the next `fn`."""
    start = source.index("pub fn parse(")
    end = source.index(" fn ", start + len("pub fn parse("))
    return start, source[start:end]


def store_modes(source: str) -> dict[str, str]:
    """Each mode name `Mode::parse` accepts, with the `Mode` it gives."""
    _, body = _parse_body(source)
    return {
        name: m["mode"] for m in _MODE_ARM.finditer(body) for name in _STRING.findall(m["names"])
    }


def without_mode(source: str, name: str) -> str:
    """The source with mode `name` gone from `Mode::parse`: the whole arm if it is the arm's only
    name, else just that alternative."""
    offset, body = _parse_body(source)
    for m in _MODE_ARM.finditer(body):
        names = _STRING.findall(m["names"])
        if name not in names:
            continue
        kept = [n for n in names if n != name]
        indent = m.group(0)[: len(m.group(0)) - len(m.group(0).lstrip())]
        arm = indent + " | ".join(f'"{n}"' for n in kept)
        arm = f"{arm} => Self::{m['mode']},\n" if kept else ""
        return source[: offset + m.start()] + arm + source[offset + m.end() :]
    raise ValueError(f"Mode::parse has no mode {name!r}")


def modes_in_rust_tests(source: str) -> set[str]:
    """The mode names the file's own tests expect to parse: `Mode::parse("x").unwrap()`, and
    each name of a `for name in [...]` loop over `Mode::parse(name).unwrap()`."""
    tests = inside_tests(source)
    found = set(re.findall(r'Mode::parse\("([^"]*)"\)\.unwrap\(\)', tests))
    loops = r"for name in \[([^\]]*)\]\s*\{[^}]*Mode::parse\(name\)\.unwrap"
    for loop in re.finditer(loops, tests):
        found |= set(_STRING.findall(loop[1]))
    return found
