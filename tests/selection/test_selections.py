"""Selections of every kind (steps, None, integer arrays, masks, oindex, vindex, blocks):
results equal NumPy's on the same data and zarr-python's reading the same store where it
supports the selection; invalid selections raise NumPy's exception types; a selection reads
exactly the chunks (and inner chunks of shards) it touches.

Hypothesis examples are few and small: the file runs in seconds.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
import zarr
import zarrpipe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.zarr_stores import assert_values, quiet_zarr_writes, sample_values
from test_properties import _write, layouts

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _slice(draw, n):
    bound = st.none() | st.integers(-n - 2, n + 2)
    step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
    return slice(draw(bound), draw(bound), step)


def _ints(draw, n, size):
    return draw(st.lists(st.integers(-n, n - 1), min_size=size, max_size=size))


@st.composite
def basic_keys(draw, shape):
    """Integers, slices of any step, None, Ellipsis."""
    items = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "slice", "none"]))
        if kind == "none":
            items.append(None)
        if kind == "int" and n > 0:
            items.append(draw(st.integers(-n, n - 1)))
        else:
            items.append(_slice(draw, n))
    if draw(st.booleans()) and items:
        i = draw(st.integers(0, len(items) - 1))
        items[i : i + 1] = [Ellipsis]
    return tuple(items)


@st.composite
def orthogonal_keys(draw, shape):
    """Per axis an int, a slice of any step, an int list (any order, repeats, negative) or
    a boolean mask."""
    items = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "ints", "mask"] if n else ["slice"]))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            items.append(_slice(draw, n))
        elif kind == "ints":
            items.append(np.array(_ints(draw, n, draw(st.integers(0, 5))), dtype=np.int64))
        else:
            items.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
    return tuple(items)


@st.composite
def coordinate_keys(draw, shape):
    """Integer arrays broadcast together (one per axis), or one mask of the array's shape."""
    if draw(st.booleans()) or 0 in shape:
        size = int(np.prod(shape))
        bits = draw(st.lists(st.booleans(), min_size=size, max_size=size))
        return np.array(bits, dtype=bool).reshape(shape)
    bshape = tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=2)))
    items = []
    for n in shape:
        # Each array has the broadcast shape or a broadcastable one (ones in places).
        own = tuple(d if draw(st.booleans()) else 1 for d in bshape)
        size = int(np.prod(own))
        items.append(np.array(_ints(draw, n, size), dtype=np.int64).reshape(own))
    return tuple(items)


@st.composite
def mixed_keys(draw, shape):
    """NumPy's advanced indexing mixed with slices: the advanced dims go in place or first."""
    items = []
    for n in shape:
        if n and draw(st.booleans()):
            items.append(np.array(_ints(draw, n, draw(st.integers(1, 3))), dtype=np.int64))
        else:
            items.append(_slice(draw, n))
    # Make the arrays broadcast: all of the first array's length.
    lengths = [len(i) for i in items if isinstance(i, np.ndarray)]
    items = [np.resize(i, lengths[0]) if isinstance(i, np.ndarray) else i for i in items]
    return tuple(items)


def _oindex_numpy(a, key):
    """NumPy's reading of an orthogonal selection (one axis at a time)."""
    out = a
    axis = 0
    drop = []
    for item in key:
        if isinstance(item, int):
            out = np.take(out, [item], axis=axis)
            drop.append(axis)
        elif isinstance(item, slice):
            out = out[(slice(None),) * axis + (item,)]
        else:
            idx = np.flatnonzero(item) if item.dtype == bool else item
            out = np.take(out, idx, axis=axis)
        axis += 1
    return out.reshape([d for k, d in enumerate(out.shape) if k not in drop])


def _zarr_agrees(read, want, what):
    """zarr-python's answer, where it supports the selection, equals NumPy's."""
    try:
        got = read()
    except (IndexError, TypeError, ValueError, NotImplementedError):
        return  # a selection zarr-python refuses (negative steps, None...)
    got = np.asarray(got)
    assert_values(got.astype(got.dtype.newbyteorder("=")), want, f"zarr-python {what}")


@SETTINGS
@given(data=st.data(), layout=layouts())
def test_every_kind_equals_numpy_and_zarr(data, layout):
    shape = layout[0]
    dtype = np.dtype(layout[3])
    values = sample_values(dtype, shape, seed=data.draw(st.integers(0, 1000)))
    with tempfile.TemporaryDirectory() as root:
        _write(root, values, layout)
        with quiet_zarr_writes():
            z = zarr.open_array(store=root, path="a", mode="r")
            ref = np.asarray(z[...])
        expected = ref.astype(ref.dtype.newbyteorder("="))
        store = zarrpipe.Store(root, cache_bytes=data.draw(st.sampled_from([0, 1 << 20])))
        arr = store.open_array("a")
        for key in data.draw(st.lists(basic_keys(shape), min_size=1, max_size=3)):
            want = expected[key]
            assert_values(np.asarray(arr[key]), want, f"arr[{key!r}]")
            assert_values(np.asarray(store.read("a", key)), want, f"read({key!r})")
            _zarr_agrees(lambda key=key: z[key], want, f"[{key!r}]")
        for key in data.draw(st.lists(orthogonal_keys(shape), min_size=1, max_size=3)):
            want = _oindex_numpy(expected, key)
            assert_values(np.asarray(arr.oindex[key]), want, f"oindex[{key!r}]")
            _zarr_agrees(lambda key=key: z.oindex[key], want, f"oindex[{key!r}]")
        for key in data.draw(st.lists(coordinate_keys(shape), min_size=1, max_size=3)):
            want = expected[key]
            t = arr.vindex[key]
            assert_values(np.asarray(t), want, f"vindex[{key!r}]")
            _zarr_agrees(lambda key=key: z.vindex[key], want, f"vindex[{key!r}]")
        key = data.draw(mixed_keys(shape))
        assert_values(np.asarray(arr[key]), expected[key], f"arr[{key!r}]")
        if all(shape):
            grid = [-(-s // c) for s, c in zip(shape, arr.shards or arr.chunks, strict=True)]
            block = tuple(
                data.draw(st.integers(-g, g - 1) | st.builds(slice, st.integers(-g, g)))
                for g in grid
            )
            got = np.asarray(arr.blocks[block])
            _zarr_agrees(lambda: z.blocks[block], got, f"blocks[{block!r}]")
        # A fresh buffer every time: indexing hands it to NumPy writable, without a copy.
        owned = arr.oindex[(slice(None, None, -1),) * len(shape)]
        assert owned.flags.writeable and type(owned.base).__name__ == "_ArrayMemory"


@settings(max_examples=60, deadline=None, database=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
    data=st.data(),
)
def test_invalid_selections_raise_numpys_exception(shape, data):
    expected = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    n = shape[0]
    key = data.draw(
        st.sampled_from(
            [
                n,
                -n - 1,
                [0, n],
                np.array([[0], [n]]),
                np.zeros(n + 1, bool),
                ([0, 1], [0, 1, 2]),
                slice(0, 3, 0),
                (0,) * (len(shape) + 1),
                (Ellipsis, Ellipsis),
                1.5,
                "a",
                [0.5],
            ]
        )
    )
    with tempfile.TemporaryDirectory() as root:
        with quiet_zarr_writes():
            zarr.create_array(store=root, shape=shape, chunks=(2,) * len(shape), dtype="i4")[
                ...
            ] = expected
        arr = zarrpipe.Store(root).open_array("")
        try:
            expected[key]
        except Exception as e:  # the type is what is compared
            numpy_error = type(e)
        else:
            assert_values(np.asarray(arr[key]), expected[key], f"arr[{key!r}]")
            return
        with pytest.raises(numpy_error):
            arr[key]
        with pytest.raises(numpy_error):
            arr.vindex[key]


def _chunk_files(root):
    return sorted(
        os.path.join(d, f) for d, _, files in os.walk(os.path.join(root, "c")) for f in files
    )


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_a_coordinate_selection_reads_exactly_the_chunks_it_touches(tmp_path, sharded):
    shape, chunks = (40, 40), (4, 4)
    data = np.arange(1600, dtype=np.float64).reshape(shape)
    with quiet_zarr_writes():
        z = zarr.create_array(
            store=str(tmp_path),
            shape=shape,
            chunks=chunks,
            shards=(20, 20) if sharded else None,
            dtype="f8",
        )
        z[...] = data
    rows = np.array([0, 1, 5, 39, 38, 22, 0, 5])
    cols = np.array([0, 2, 6, 39, 36, 21, 3, 7])
    touched = {(r // 4, c // 4) for r, c in zip(rows, cols, strict=True)}
    assert len(touched) == 4
    store = zarrpipe.Store(str(tmp_path), cache_bytes=64 << 20)
    arr = store.open_array("")
    # An orthogonal selection touches the product of its per-axis chunks: 2 x 2 of them.
    got = np.asarray(arr.oindex[[1, 30, 2], [2, 3, 25]])
    np.testing.assert_array_equal(got, data[[1, 30, 2]][:, [2, 3, 25]])
    assert store.cache_info()["misses"] == 2 * 2
    store.clear_cache()
    store = zarrpipe.Store(str(tmp_path), cache_bytes=64 << 20)
    arr = store.open_array("")
    if not sharded:
        # Untouched chunk files are garbage: reading any of them would raise DecodeError.
        keep = {os.path.join(str(tmp_path), "c", str(r), str(c)) for r, c in touched}
        for f in _chunk_files(str(tmp_path)):
            if f not in keep:
                with open(f, "wb") as fh:
                    fh.write(b"not a chunk")
    got = np.asarray(arr.vindex[rows, cols])
    np.testing.assert_array_equal(got, data[rows, cols])
    info = store.cache_info()
    assert info["misses"] == len(touched), info
    assert info["entries"] == len(touched), info
    # Read again: every chunk comes from the cache, nothing else is read.
    np.testing.assert_array_equal(np.asarray(arr.vindex[rows, cols]), data[rows, cols])
    info = store.cache_info()
    assert info["misses"] == len(touched) and info["hits"] == len(touched), info


def test_result_is_a_unique_fresh_buffer(tmp_path):
    with quiet_zarr_writes():
        z = zarr.create_array(store=str(tmp_path), shape=(9, 9), chunks=(4, 4), dtype="i2")
        z[...] = np.arange(81, dtype="i2").reshape(9, 9)
    store = zarrpipe.Store(str(tmp_path), cache_bytes=1 << 20)
    arr = store.open_array("")
    for a in (arr[::2, None], arr.oindex[[8, 0], ::-3], arr.vindex[[1, 2], [3, 4]], arr.blocks[1]):
        # Indexing hands over the read's own buffer: writable, not a copy of anything.
        assert isinstance(a, np.ndarray) and a.flags.writeable and a.flags.owndata is False
        assert type(a.base).__name__ == "_ArrayMemory"
        a[...] = 0  # the cache is not affected
    for key in (np.s_[::2, None], np.s_[1, [2, 3]]):
        t = arr.read(key)  # `read` keeps the Tensor and its moving door
        a = np.from_dlpack(t.into_dlpack())
        assert a.shape == t.shape and a.flags.writeable
    np.testing.assert_array_equal(np.asarray(arr[::2]), np.arange(81).reshape(9, 9)[::2])


def test_read_into_with_selections_of_every_kind(tmp_path):
    data = np.arange(90, dtype="f4").reshape(9, 10)
    with quiet_zarr_writes():
        zarr.create_array(store=str(tmp_path), shape=(9, 10), chunks=(4, 3), dtype="f4")[...] = data
    arr = zarrpipe.Store(str(tmp_path)).open_array("")
    for key in [np.s_[::2, [1, 5]], np.s_[[8, 0, 8], None, 2:7:2]]:
        out = np.full(data[key].shape, -1, "f4")
        arr.read_into(key, out)
        np.testing.assert_array_equal(out, data[key])
        strided = np.full(data[key].shape[::-1], -1, "f4").T  # not C-contiguous
        arr.read_into(key, strided)
        np.testing.assert_array_equal(strided, data[key])
    with pytest.raises(ValueError, match="shape"):
        arr.read_into(np.s_[::2, [1, 5]], np.zeros((5, 3), "f4"))
