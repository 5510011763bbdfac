"""Writes through selections of every kind (steps, None, integer arrays, masks, oindex,
vindex, blocks; Array, Store and the array engine): afterwards the array holds what NumPy
holds after the same assignments, read back by zarr-python (an independent reader) and by
zarrpipe; a position selected twice keeps the last value, as in NumPy; a write touches only
the chunks its selection touches.
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
from test_selections import basic_keys, coordinate_keys, mixed_keys, orthogonal_keys

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _oindex_numpy_set(a: np.ndarray, key: tuple, value) -> None:
    """NumPy's meaning of `a.oindex[key] = value`: integer axes are kept as length-1 index
    arrays so that `np.ix_` applies, and the value is broadcast to the selection's shape."""
    idx = []
    dropped = []
    for axis, item in enumerate(key):
        n = a.shape[axis]
        if isinstance(item, int):
            idx.append(np.array([item % n]))
            dropped.append(axis)
        elif isinstance(item, slice):
            idx.append(np.arange(n)[item])
        else:
            idx.append(np.flatnonzero(item) if item.dtype == bool else item % n)
    full = tuple(len(i) for i in idx)
    kept = tuple(d for k, d in enumerate(full) if k not in dropped)
    a[np.ix_(*idx)] = np.broadcast_to(value, kept).reshape(full)


def _values(draw, dtype, shape):
    """A value to assign: an array of the selection's shape, a scalar, or a row that
    broadcasts."""
    how = draw(st.sampled_from(["array", "scalar", "row"]))
    seed = draw(st.integers(0, 1000))
    if how == "scalar" or len(shape) == 0:
        return sample_values(dtype, (1,), seed=seed)[0]
    if how == "row":
        return sample_values(dtype, shape[-1:], seed=seed)
    return sample_values(dtype, shape, seed=seed)


@SETTINGS
@given(data=st.data(), layout=layouts())
def test_writes_of_every_kind_equal_numpy(data, layout):
    shape = layout[0]
    dtype = np.dtype(layout[3])
    values = sample_values(dtype, shape, seed=data.draw(st.integers(0, 1000)))
    with tempfile.TemporaryDirectory() as root:
        _write(root, values, layout)
        # What the store holds to start with, as zarr-python reads it (a chunk zarr-python
        # judged all fill value, NaN parts included, was not stored).
        with quiet_zarr_writes():
            start = np.asarray(zarr.open_array(store=root, path="a", mode="r")[...])
        expected = np.array(start, dtype=dtype.newbyteorder("="))
        store = zarrpipe.Store(root, cache_bytes=data.draw(st.sampled_from([0, 1 << 20])))
        arr = store.open_array("a")
        for _ in range(data.draw(st.integers(1, 4))):
            kind = data.draw(st.sampled_from(["basic", "oindex", "vindex", "mixed", "blocks"]))
            if kind == "basic":
                key = data.draw(basic_keys(shape))
                value = _values(data.draw, dtype, expected[key].shape)
                expected[key] = value
                if data.draw(st.booleans()):
                    arr[key] = value
                else:
                    store.write("a", key, value)
            elif kind == "oindex":
                key = data.draw(orthogonal_keys(shape))
                value = _values(data.draw, dtype, arr.oindex[key].shape)
                _oindex_numpy_set(expected, key, value)
                arr.oindex[key] = value
            elif kind == "vindex":
                key = data.draw(coordinate_keys(shape))
                value = _values(data.draw, dtype, expected[key].shape)
                expected[key] = value
                arr.vindex[key] = value
            elif kind == "mixed":
                key = data.draw(mixed_keys(shape))
                value = _values(data.draw, dtype, expected[key].shape)
                expected[key] = value
                arr[key] = value
            elif all(shape):
                stored = arr.shards or arr.chunks
                grid = [-(-s // c) for s, c in zip(shape, stored, strict=True)]
                block = tuple(data.draw(st.integers(0, g - 1)) for g in grid)
                region = tuple(
                    slice(b * c, min((b + 1) * c, s))
                    for b, c, s in zip(block, stored, shape, strict=True)
                )
                value = _values(data.draw, dtype, expected[region].shape)
                expected[region] = value
                arr.blocks[block] = value
            assert_values(np.asarray(arr[...]), expected, f"zarrpipe after {kind} write")
        with quiet_zarr_writes():
            got = np.asarray(zarr.open_array(store=root, path="a", mode="r")[...])
        assert_values(got.astype(got.dtype.newbyteorder("=")), expected, "zarr-python")


def test_repeated_positions_keep_the_last_value(tmp_path):
    store = zarrpipe.Store(str(tmp_path))
    arr = store.create_array("a", shape=(10, 10), dtype="i4", chunks=(3, 3))
    want = np.zeros((10, 10), "i4")
    rows, cols = np.array([1, 7, 1, 1]), np.array([2, 8, 2, 2])
    arr.vindex[rows, cols] = [5, 6, 7, 8]
    want[rows, cols] = [5, 6, 7, 8]
    arr.oindex[[4, 4, 0], ::3] = np.arange(12, dtype="i4").reshape(3, 4)
    want[np.ix_([4, 4, 0], np.arange(10)[::3])] = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(arr[...]), want)
    assert want[1, 2] == 8 and want[4, 0] == 4


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_a_point_write_rewrites_only_the_chunks_it_touches(tmp_path, sharded):
    store = zarrpipe.Store(str(tmp_path))
    arr = store.create_array(
        "a",
        shape=(40, 40),
        dtype="f8",
        chunks=(4, 4),
        shards=(20, 20) if sharded else None,
        compressors=None,
    )
    arr[...] = np.arange(1600, dtype="f8").reshape(40, 40)
    files = {
        os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
        for d, _, fs in os.walk(tmp_path / "a" / "c")
        for f in fs
    }
    rows, cols = np.array([0, 39, 22]), np.array([1, 38, 21])
    arr.vindex[rows, cols] = -1.0
    stored = 20 if sharded else 4
    touched = {
        os.path.join(str(tmp_path), "a", "c", str(r // stored), str(c // stored))
        for r, c in zip(rows, cols, strict=True)
    }
    changed = {f for f, t in files.items() if os.stat(f).st_mtime_ns != t}
    assert changed == touched
    want = np.arange(1600, dtype="f8").reshape(40, 40)
    want[rows, cols] = -1.0
    np.testing.assert_array_equal(np.asarray(arr[...]), want)


def test_writes_to_all_fill_delete_the_chunk(tmp_path):
    store = zarrpipe.Store(str(tmp_path))
    arr = store.create_array("a", shape=(8,), dtype="u1", chunks=(4,), fill_value=0)
    arr[...] = np.arange(1, 9, dtype="u1")
    arr.oindex[np.array([True, True, True, True, False, False, False, False])] = 0
    assert not os.path.exists(tmp_path / "a" / "c" / "0")
    assert os.path.exists(tmp_path / "a" / "c" / "1")
    np.testing.assert_array_equal(np.asarray(arr[...]), [0, 0, 0, 0, 5, 6, 7, 8])


def test_bad_fancy_writes_raise_and_write_nothing(tmp_path):
    store = zarrpipe.Store(str(tmp_path))
    arr = store.create_array("a", shape=(6, 6), dtype="f4", chunks=(2, 2))
    arr[...] = 1.0
    with pytest.raises(IndexError):
        arr.vindex[[0, 6], [0, 0]] = 2.0
    with pytest.raises(IndexError):
        arr.vindex[[0, 1], [0, 1, 2]] = 2.0  # do not broadcast
    with pytest.raises(ValueError):
        arr.oindex[[0, 1], [0, 1, 2]] = np.zeros(4)  # does not broadcast to (2, 3)
    with pytest.raises(PermissionError):
        zarrpipe.Store(str(tmp_path), mode="r").open_array("a").vindex[[0], [0]] = 3.0
    np.testing.assert_array_equal(np.asarray(arr[...]), np.ones((6, 6), "f4"))


STRING_WRITES = {
    "vindex-points": (lambda a: a.vindex, ([0, 7, 3], [5, 0, 3]), ["p", "qq", "r"]),
    "vindex-repeated": (lambda a: a.vindex, ([1, 1], [2, 2]), ["first", "last"]),
    "vindex-mask": (lambda a: a.vindex, "mask", "masked"),
    "oindex": (lambda a: a.oindex, ([6, 1], [0, 4, 5]), "o"),
    "steps": (lambda a: a, (slice(None, None, 3), slice(5, None, -2)), "s"),
    "index-array": (lambda a: a, ([7, 0, 2],), "row"),
}


def _oindex_key(key):
    return np.ix_(*[np.asarray(k) for k in key])


@pytest.mark.parametrize("shards", [None, (4, 6)], ids=["chunked", "sharded"])
@pytest.mark.parametrize("case", sorted(STRING_WRITES))
def test_every_selection_writes_strings(tmp_path, case, shards):
    """Strings take every kind of selection in writes: the array ends as NumPy's assignment
    leaves a mirror (the last of repeated positions wins), read back by zarr-python."""
    with quiet_zarr_writes():
        z = zarr.create_array(
            store=str(tmp_path), shape=(8, 6), chunks=(2, 3), shards=shards, dtype=str
        )
        words = np.array([f"w{i}" * (i % 3) for i in range(48)], dtype=object).reshape(8, 6)
        z[...] = words
    arr = zarrpipe.Store(str(tmp_path)).open_array("")
    view, key, value = STRING_WRITES[case]
    mirror = words.copy()
    if isinstance(key, str):  # a mask
        key = (np.arange(48).reshape(8, 6) % 5 == 0,)
    if case == "oindex":
        mirror[_oindex_key(key)] = value
    else:
        mirror[key] = value
    view(arr)[key] = value
    assert zarr.open_array(str(tmp_path), mode="r")[...].tolist() == mirror.tolist()
    assert arr[...].tolist() == mirror.tolist()


def test_bytes_take_point_writes(tmp_path):
    arr = zarrpipe.Store(str(tmp_path)).create_array("b", shape=(5,), chunks=(2,), dtype=bytes)
    arr.vindex[[4, 0, 4]] = [b"x", b"yy", b"zzz"]
    assert arr[...].tolist() == [b"yy", b"", b"", b"", b"zzz"]


def test_bad_string_writes_change_nothing(tmp_path):
    arr = zarrpipe.Store(str(tmp_path)).create_array("s", shape=(6,), chunks=(2,), dtype=str)
    arr[...] = ["a", "bb", "ccc", "d", "ee", "f"]
    with pytest.raises(IndexError):
        arr.vindex[[0, 6]] = "x"
    with pytest.raises(ValueError):
        arr.oindex[[0, 1, 2]] = ["x", "y"]
    assert arr[...].tolist() == ["a", "bb", "ccc", "d", "ee", "f"]
