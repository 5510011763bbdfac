"""Selections of every kind, normalised for the Rust engine with NumPy's semantics.

A user's key becomes a *pick*: a list of factors whose C-order product is the result
(``("step", axis, start, step, count)`` for an arithmetic progression along one axis,
``("points", axes, coords)`` for an ``(n, len(axes))`` int64 array of points), plus the
result's shape, which inserts ``None`` axes, drops integer axes and unfolds broadcast index
shapes (a reshape: the buffer stays one fresh, unique allocation). NumPy does the heavy
lifting (``operator.index``, ``slice.indices``, broadcasting, ``nonzero``) and raises
NumPy's exception types; the engine checks every factor again before reading.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

Factor = tuple[Any, ...]
Pick = tuple[list[Factor], tuple[int, ...]]

_VALID = (
    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
    "boolean arrays are valid indices"
)


def _index_array(item: Any) -> np.ndarray:
    """An integer or boolean index array, as NumPy reads one (an empty list is intp)."""
    a = np.asarray(item)
    if a.size == 0 and not isinstance(item, np.ndarray):
        a = a.astype(np.intp)
    if a.dtype.kind not in "iub":
        raise IndexError(_VALID)
    return a


def _classify(item: Any) -> tuple[str, Any]:
    if item is None:
        return "none", None
    if item is Ellipsis:
        return "ellipsis", None
    if isinstance(item, slice):
        return "slice", item
    if isinstance(item, bool | np.bool_):
        return "bool0", bool(item)
    if isinstance(item, np.ndarray) and item.ndim > 0:
        a = _index_array(item)
        return ("bool" if a.dtype == bool else "array"), a
    try:
        return "int", operator.index(item)
    except TypeError:
        pass
    if isinstance(item, str | bytes) or not isinstance(item, Sequence | np.ndarray):
        raise IndexError(_VALID)
    a = _index_array(item)
    if a.dtype == bool and a.ndim == 0:
        return "bool0", bool(a)
    return ("bool" if a.dtype == bool else "array"), a


def _expand(shape: Sequence[int], key: Any) -> list[tuple[str, Any]]:
    """The key as a list of classified items, its ellipsis expanded into full slices."""
    items = [_classify(k) for k in (key if isinstance(key, tuple) else (key,))]
    ellipses = sum(kind == "ellipsis" for kind, _ in items)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(
        v.ndim if kind == "bool" else 1
        for kind, v in items
        if kind in ("int", "slice", "array", "bool")
    )
    if used > len(shape):
        raise IndexError(
            f"too many indices for array: array is {len(shape)}-dimensional, "
            f"but {used} were indexed"
        )
    full = [("slice", slice(None))] * (len(shape) - used)
    if ellipses:
        at = next(i for i, (kind, _) in enumerate(items) if kind == "ellipsis")
        return items[:at] + full + items[at + 1 :]
    return items + full


def _wrap(a: np.ndarray, n: int, axis: int) -> np.ndarray:
    a = a.astype(np.int64, copy=False)
    bad = (a < -n) | (a >= n)
    if bad.any():
        raise IndexError(
            f"index {int(a[bad].flat[0])} is out of bounds for axis {axis} with size {n}"
        )
    return np.where(a < 0, a + n, a)


def _int(i: int, n: int, axis: int) -> int:
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
    return i + n if i < 0 else i


def _step(axis: int, s: slice, n: int) -> tuple[Factor, int]:
    start, stop, step = s.indices(n)
    count = len(range(start, stop, step))
    return ("step", axis, start if count else 0, step, count), count


def _points(
    axes: list[int], arrays: list[np.ndarray], extra: list[tuple[int, ...]]
) -> tuple[Factor | None, tuple[int, ...]]:
    """The points of broadcast index arrays (and the shapes of boolean scalars, which take
    part in the broadcast without selecting along an axis)."""
    shapes = [a.shape for a in arrays] + extra
    try:
        bshape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError(
            "shape mismatch: indexing arrays could not be broadcast together with shapes "
            + " ".join(str(s) for s in shapes)
        ) from None
    if not axes:
        return None, tuple(bshape)
    coords = np.empty((int(np.prod(bshape, dtype=np.int64)), len(axes)), dtype=np.int64)
    for t, a in enumerate(arrays):
        coords[:, t] = np.broadcast_to(a, bshape).reshape(-1)
    return ("points", axes, coords), tuple(int(d) for d in bshape)


def numpy_pick(shape: Sequence[int], key: Any) -> Pick:
    """``array[key]`` as NumPy reads it: basic indexing (steps, ``None``, ``...``) and
    advanced indexing (integer arrays broadcast together, boolean masks), advanced
    dimensions in place when the advanced indices are adjacent, else first."""
    items = _expand(shape, key)
    advanced = any(kind in ("array", "bool", "bool0") for kind, _ in items)
    # (slot in the item list, factor or None for a new axis, output dims it contributes)
    basic: list[tuple[int, Factor | None, tuple[int, ...]]] = []
    adv_axes: list[int] = []
    adv_arrays: list[np.ndarray] = []
    adv_slots: list[int] = []
    extra: list[tuple[int, ...]] = []
    axis = 0
    for slot, (kind, v) in enumerate(items):
        if kind == "none":
            basic.append((slot, None, (1,)))
        elif kind == "slice":
            factor, count = _step(axis, v, shape[axis])
            basic.append((slot, factor, (count,)))
            axis += 1
        elif kind == "int" and not advanced:
            i = _int(v, shape[axis], axis)
            basic.append((slot, ("step", axis, i, 1, 1), ()))
            axis += 1
        elif kind == "bool0":
            extra.append((int(v),))
            adv_slots.append(slot)
        elif kind in ("int", "array"):
            arr = np.asarray(v) if kind == "int" else v
            adv_arrays.append(_wrap(arr, shape[axis], axis))
            adv_axes.append(axis)
            adv_slots.append(slot)
            axis += 1
        else:  # a boolean mask over v.ndim axes
            dims = shape[axis : axis + v.ndim]
            for k, (m, n) in enumerate(zip(v.shape, dims, strict=True)):
                if m != n:
                    raise IndexError(
                        f"boolean index did not match indexed array along axis {axis + k}; "
                        f"size of axis is {n} but size of corresponding boolean axis is {m}"
                    )
            for k, nz in enumerate(np.nonzero(v)):
                adv_arrays.append(nz.astype(np.int64))
                adv_axes.append(axis + k)
                adv_slots.append(slot)
            axis += v.ndim
    if not advanced:
        factors = [f for _, f, _ in basic if f is not None]
        out = tuple(d for _, _, dims in basic for d in dims)
        return factors, out
    points, bshape = _points(adv_axes, adv_arrays, extra)
    first = adv_slots[0]
    slots = sorted(set(adv_slots))
    adjacent = slots[-1] - slots[0] + 1 == len(slots)
    before = [b for b in basic if b[0] < first] if adjacent else []
    after = [b for b in basic if not adjacent or b[0] > first]
    factors = [f for _, f, _ in before if f is not None]
    if points is not None:
        factors.append(points)
    factors += [f for _, f, _ in after if f is not None]
    out = tuple(d for _, _, dims in before for d in dims) + bshape
    out += tuple(d for _, _, dims in after for d in dims)
    if points is None and 0 in bshape and factors:
        # Only boolean scalars, one of them False: nothing is selected.
        factors[0] = ("step", factors[0][1], 0, 1, 0)
    return factors, out


def orthogonal_pick(shape: Sequence[int], key: Any) -> Pick:
    """``array.oindex[key]`` (zarr-python's orthogonal selection): per axis an integer
    (drops the axis), a slice (any step), a 1-d integer array (any order, repeats) or a 1-d
    boolean mask; ``...`` and ``None`` as in NumPy."""
    items = _expand(shape, key)
    factors: list[Factor] = []
    out: list[int] = []
    axis = 0
    for kind, v in items:
        if kind == "none":
            out.append(1)
            continue
        n = shape[axis]
        if kind == "slice":
            factor, count = _step(axis, v, n)
            factors.append(factor)
            out.append(count)
        elif kind == "int":
            factors.append(("step", axis, _int(v, n, axis), 1, 1))
        else:
            if v.ndim != 1:
                raise IndexError(
                    f"orthogonal selection takes 1-d index arrays, got {v.ndim}-d on axis {axis}"
                )
            if kind == "bool":
                if v.shape[0] != n:
                    raise IndexError(
                        f"boolean index did not match indexed array along axis {axis}; "
                        f"size of axis is {n} but size of corresponding boolean axis is "
                        f"{v.shape[0]}"
                    )
                idx = np.flatnonzero(v).astype(np.int64)
            else:
                idx = _wrap(v, n, axis)
            factors.append(("points", [axis], idx.reshape(-1, 1)))
            out.append(int(idx.shape[0]))
        axis += 1
    return factors, tuple(out)


def block_slices(shape: Sequence[int], blocks: Sequence[int], key: Any) -> tuple[slice, ...]:
    """``array.blocks[key]`` (zarr-python's block selection): integers and step-1 slices
    over the grid of stored chunks (shards), as element slices that keep every axis."""
    items = _expand(shape, key)
    out = []
    axis = 0
    for kind, v in items:
        n, c = shape[axis], blocks[axis]
        nblocks = -(-n // c)
        if kind == "int":
            b = _int(v, nblocks, axis)
            out.append(slice(b * c, min((b + 1) * c, n)))
        elif kind == "slice":
            start, stop, step = v.indices(nblocks)
            if step != 1:
                raise IndexError(f"block selections take step-1 slices, got step {step}")
            stop = max(start, stop)
            out.append(slice(start * c, min(stop * c, n)))
        else:
            raise IndexError(
                "block selections take integers, step-1 slices and '...', "
                f"not {'None' if kind == 'none' else 'arrays'}"
            )
        axis += 1
    return tuple(out)


def is_variable(array: Any) -> bool:
    """Whether `array` holds variable-length strings or bytes (NumPy results, no Tensor)."""
    return array.dtype.kind in "OT"


class OIndex:
    """``array.oindex[...]``: orthogonal selections."""

    __slots__ = ("_array",)

    def __init__(self, array: Any) -> None:
        self._array = array

    def __getitem__(self, key: Any) -> Any:
        return self._array._read_pick(*orthogonal_pick(self._array.shape, key))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._array._write_pick(*orthogonal_pick(self._array.shape, key), value)


class VIndex:
    """``array.vindex[...]``: coordinate selections (integer arrays broadcast together, or
    one boolean mask), with NumPy's semantics."""

    __slots__ = ("_array",)

    def __init__(self, array: Any) -> None:
        self._array = array

    def __getitem__(self, key: Any) -> Any:
        return self._array._read_pick(*numpy_pick(self._array.shape, key))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._array._write_pick(*numpy_pick(self._array.shape, key), value)


class BlockIndex:
    """``array.blocks[...]``: whole blocks of the stored chunk grid (shards of a sharded
    array)."""

    __slots__ = ("_array",)

    def __init__(self, array: Any) -> None:
        self._array = array

    def __getitem__(self, key: Any) -> Any:
        a = self._array
        return a.read(block_slices(a.shape, a.shards or a.chunks, key))

    def __setitem__(self, key: Any, value: Any) -> None:
        a = self._array
        a.write(block_slices(a.shape, a.shards or a.chunks, key), value)
