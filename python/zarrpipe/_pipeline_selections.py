"""A write's value in the shape of its selection, for the box path. The selections
themselves are parsed in Rust: boxes by `_zarrpipe._ChunkRequests`, every other kind by
`_zarrpipe._PickRequests`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from zarr.abc.store import ByteGetter
    from zarr.core.array_spec import ArraySpec
    from zarr.core.indexing import SelectorTuple

    BatchInfo = tuple[ByteGetter, ArraySpec, SelectorTuple, SelectorTuple, bool]


def value_for_selection(value: np.ndarray[Any, Any], batch: list[BatchInfo]) -> Any:
    """`value` in the shape of the selection (the extent of the batch's output selections),
    broadcast as zarr-python's pipeline does; None when the selections are not basic or the
    value has more axes than the selection (zarr-python's pipeline then writes it).

    zarr-python indexes the value with each output selection, so a value with fewer axes
    (other than a scalar) raises IndexError and one that does not broadcast ValueError: the
    same exceptions here, before any chunk is written.
    """
    extent: list[int] | None = None
    for *_, out_sel, _ in batch:
        sel = out_sel if isinstance(out_sel, tuple) else (out_sel,)
        stops = []
        for s in sel:
            if not isinstance(s, slice) or s.stop is None:
                return None
            stops.append(int(s.stop))
        extent = (
            stops if extent is None else [max(a, b) for a, b in zip(extent, stops, strict=True)]
        )
    shape = tuple(extent or ())
    if value.shape == shape:
        return value
    if value.ndim > len(shape):
        return None
    if 0 < value.ndim < len(shape):
        raise IndexError(
            f"too many indices for array: array is {value.ndim}-dimensional, "
            f"but {len(shape)} were indexed"
        )
    try:
        # A read-only view repeating values along broadcast axes (strides 0).
        return np.broadcast_to(value, shape)
    except ValueError:
        raise ValueError(
            f"could not broadcast a value of shape {value.shape} to the selection's shape {shape}"
        ) from None
