"""What the reading and the writing side of `zarrpipe.ray` share: the store every task
reopens, and argument checks."""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping
from typing import Any, Literal

from zarrpipe._zarrpipe import Store

Location = str | os.PathLike[str] | Store


def checked_count(name: str, value: Any, least: int) -> int:
    n = operator.index(value)  # TypeError for what is no integer
    if n < least:
        raise ValueError(f"{name} must be at least {least}, got {n}")
    return n


def open_store(
    location: Location,
    options: Mapping[str, str] | None,
    mode: Literal["r", "r+", "a", "w", "w-"],
) -> Store:
    """The Store every task reopens (by unpickling it): a Store given as it is, else one
    opened at `location` in `mode`."""
    if isinstance(location, Store):
        if options is not None:
            raise TypeError("options go with a location; a Store keeps its own options")
        if location.mode in ("w", "w-"):
            raise ValueError(
                f"a Store opened with mode={location.mode!r} would empty the store again in "
                "every task that unpickles it: pass its location, or a Store opened with "
                "mode 'r', 'r+' or 'a'"
            )
        return location
    return Store(location, mode=mode, options=dict(options) if options else None)


def join_path(group: str, name: str) -> str:
    return f"{group.rstrip('/')}/{name}" if group.strip("/") else name
