"""The registry of fault cases: what a case builds (`Built`), what zarrpipe must do with it
(`Case.expect`), and `case`, the decorator the *_cases modules register with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .stores import DATA, GOOD_REGION

# cases


@dataclass
class Built:
    """A broken store, and what a reader should make of it."""

    root: str
    path: str  # the array's path in the store
    bad: Any  # the selection that touches the broken part
    key: str | None = None  # the stored key a corrupt-chunk error must name
    good: Any = GOOD_REGION  # a selection that must still read correctly
    good_value: np.ndarray | None = None  # what `good` reads as (default: DATA[good])
    expected: np.ndarray | None = None  # the correct result of reading `bad`, if any
    original: np.ndarray | None = None  # the data before the damage (to spot silent errors)
    store_path: str | None = None  # for cases on the store itself (default: root)

    def __post_init__(self) -> None:
        if self.good is not None and self.good_value is None:
            self.good_value = DATA[self.good]


@dataclass
class Case:
    name: str
    section: str
    build: Callable[[str], Built]
    # zarrpipe's contract: an exception class (the read raises an instance of it), "value"
    # (the read returns Built.expected), or a tuple of such alternatives
    expect: Any
    what: str
    # where the exception is raised: "read" (the default), "open" (Store / open_array)
    stage: str = "read"
    memory: bool = False  # measure peak RSS growth (a decompression bomb / absurd header)
    tags: tuple[str, ...] = field(default_factory=tuple)


CASES: dict[str, Case] = {}


def case(name: str, section: str, expect: Any, what: str, **kw: Any):
    def register(fn: Callable[[str], Built]) -> Callable[[str], Built]:
        assert name not in CASES, name
        CASES[name] = Case(name, section, fn, expect, what, **kw)
        return fn

    return register


def _error(name: str) -> type:
    """A zarrpipe exception class by name, resolved lazily (the extension may be rebuilding)."""
    import zarrpipe

    return getattr(zarrpipe, name)


class Lazy:
    """An exception class named now, imported when first compared."""

    def __init__(self, name: str) -> None:
        self.name = name

    def resolve(self) -> type:
        return _error(self.name)

    def __repr__(self) -> str:
        return self.name


def allowed_outcomes(c: Case) -> tuple[Any, ...]:
    """The case's allowed outcomes: exception classes (resolved) and/or "value"."""
    alts = c.expect if isinstance(c.expect, tuple) else (c.expect,)
    return tuple(a.resolve() if isinstance(a, Lazy) else a for a in alts)


def allowed_exceptions(c: Case) -> tuple[type, ...]:
    return tuple(a for a in allowed_outcomes(c) if isinstance(a, type))


DECODE = Lazy("DecodeError")
CHECKSUM = Lazy("ChecksumError")
METADATA = Lazy("MetadataError")
UNSUPPORTED = Lazy("UnsupportedError")
