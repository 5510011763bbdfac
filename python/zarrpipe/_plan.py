"""Turns zarr-python's per-chunk selections into the byte placements zarrpipe's engine uses."""

from __future__ import annotations

import operator
from typing import Any

# (wanted (start, stop) per chunk axis, byte offset in the array, byte stride per chunk axis)
Placement = tuple[list[tuple[int, int]], int, list[int]]


def _as_int(sel: Any) -> int | None:
    if isinstance(sel, bool):
        return None
    try:
        return operator.index(sel)
    except TypeError:
        return None


def placement(
    chunk_shape: tuple[int, ...],
    chunk_selection: Any,
    out_selection: Any,
    out_shape: tuple[int, ...],
    out_strides: tuple[int, ...],
) -> Placement | None:
    """Where the part of a chunk that `chunk_selection` picks lands in an array of
    `out_shape`/`out_strides` (bytes) at `out_selection`; None when it is not a basic,
    step-1 selection (integer arrays, steps, masks), which the caller leaves to zarr-python.

    Integers in `chunk_selection` drop their axis; every other chunk axis takes the next item
    of `out_selection`, as zarr-python's indexers lay them out.
    """
    if not isinstance(chunk_selection, tuple):
        chunk_selection = (chunk_selection,)
    if not isinstance(out_selection, tuple):
        out_selection = (out_selection,)
    if len(chunk_selection) != len(chunk_shape):
        return None
    want: list[tuple[int, int]] = []
    strides: list[int] = []
    offset = 0
    out_axis = 0
    for sel, n in zip(chunk_selection, chunk_shape, strict=True):
        index = _as_int(sel)
        if index is not None:
            if not 0 <= index < n:
                return None
            want.append((index, index + 1))
            strides.append(0)
            continue
        if not isinstance(sel, slice):
            return None
        start, stop, step = sel.indices(n)
        if step != 1 or out_axis >= len(out_selection):
            return None
        out_sel = out_selection[out_axis]
        if not isinstance(out_sel, slice):
            return None
        ostart, ostop, ostep = out_sel.indices(out_shape[out_axis])
        stop = max(stop, start)
        if ostep != 1 or max(ostop - ostart, 0) != stop - start or out_strides[out_axis] < 0:
            return None
        want.append((start, stop))
        offset += ostart * out_strides[out_axis]
        strides.append(out_strides[out_axis])
        out_axis += 1
    if out_axis != len(out_selection) or len(out_shape) != len(out_selection):
        return None
    return want, offset, strides


def wanted(chunk_shape: tuple[int, ...], chunk_selection: Any) -> list[tuple[int, int]] | None:
    """The (start, stop) per chunk axis that a basic step-1 `chunk_selection` picks, or None."""
    if not isinstance(chunk_selection, tuple):
        chunk_selection = (chunk_selection,)
    if len(chunk_selection) != len(chunk_shape):
        return None
    want = []
    for sel, n in zip(chunk_selection, chunk_shape, strict=True):
        index = _as_int(sel)
        if index is not None:
            if not 0 <= index < n:
                return None
            want.append((index, index + 1))
        elif isinstance(sel, slice):
            start, stop, step = sel.indices(n)
            if step != 1:
                return None
            want.append((start, max(stop, start)))
        else:
            return None
    return want
