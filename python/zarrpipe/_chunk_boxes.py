"""Bounding boxes of zarr-python's per-chunk selections, for the pipeline's general path.

For a selection that is not a step-1 slice per axis (integer arrays, masks, steps), the
pipeline decodes in Rust only the box of each chunk that the selection touches (inner chunks
of a shard outside it are never read), into a scratch array that stacks the chunks along
axis 0, and NumPy applies zarr-python's own chunk selection to each chunk's view.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

Box = list[tuple[int, int]]

# Scratch memory per group of chunks (at least one chunk per group): bounds the address space
# a selection over many large chunks asks for at once.
GROUP_BYTES = 256 << 20


class NotABox(Exception):
    """A chunk selection this module does not understand (zarr-python's pipeline runs it)."""


def selection_box(selection: Any, shape: Sequence[int]) -> Box | None:
    """The smallest box of a chunk of `shape` holding every element `selection` picks (one
    entry per axis: ints, slices of any step, integer or boolean arrays as `numpy.ix_` or
    coordinate lists give them); None when it picks nothing."""
    sel = selection if isinstance(selection, tuple) else (selection,)
    if len(sel) != len(shape):
        raise NotABox(f"a selection of {len(sel)} axes for a chunk of {len(shape)}")
    box: Box = []
    for s, n in zip(sel, shape, strict=True):
        span = _axis_span(s, n)
        if span is None:
            return None
        box.append(span)
    return box


def _axis_span(s: Any, n: int) -> tuple[int, int] | None:
    if isinstance(s, slice):
        r = range(*s.indices(n))
        return (min(r[0], r[-1]), max(r[0], r[-1]) + 1) if len(r) else None
    if not isinstance(s, bool | np.bool_):
        try:
            i = operator.index(s)
        except TypeError:
            pass
        else:
            i = i + n if i < 0 else i
            if not 0 <= i < n:
                raise IndexError(f"index {i} is out of bounds for a chunk axis of length {n}")
            return i, i + 1
    a = np.asarray(s)
    if a.dtype == bool:
        if a.ndim != 1:
            raise NotABox("a boolean mask over several axes of a chunk")
        a = np.flatnonzero(a)
    elif a.dtype.kind not in "iu":
        raise NotABox(f"a chunk selection of {a.dtype} values")
    if a.size == 0:
        return None
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= n:
        raise NotABox("negative or out-of-range indices in a chunk selection")
    return lo, hi + 1


def groups(sizes: Sequence[int], limit: int = GROUP_BYTES) -> Iterator[range]:
    """Consecutive index ranges whose sizes add up to at most `limit` (one item at least)."""
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if i > start and total + size > limit:
            yield range(start, i)
            start, total = i, 0
        total += size
    if start < len(sizes):
        yield range(start, len(sizes))
