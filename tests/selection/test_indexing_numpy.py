"""Indexing gives what zarr-python's indexing gives: NumPy arrays (and NumPy scalars where
zarr-python returns one) of the same shape, dtype and values, for every selection kind, on a
store zarr-python wrote; each array writable and over the read's own buffer (no copy)."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
import zarrpipe
from support.zarr_stores import quiet_zarr_writes

KEYS = [
    (1, 2, 3),
    (np.int64(1), 2, 3),
    (1,),
    1,
    -1,
    np.s_[1:3, 2],
    np.s_[...],
    np.s_[..., 0],
    np.s_[::2, 1, 1:],
    np.s_[[0, 2, 2], :, 1],
    np.s_[1, [2, 0]],
    np.s_[[0, 1], [1, 2], [3, 0]],
    (),
]


@pytest.fixture(params=["int32", "<f8", "datetime64[s]", "<U3", "sharded"])
def arrays(tmp_path, request):
    """The same store opened by zarrpipe and by zarr-python."""
    kind = request.param
    dtype = "int32" if kind == "sharded" else kind
    data = np.arange(4 * 5 * 6).reshape(4, 5, 6).astype(dtype)
    extra = {"shards": (4, 4, 6)} if kind == "sharded" else {}
    with quiet_zarr_writes():
        z = zarr.create_array(store=str(tmp_path), shape=data.shape, chunks=(2, 2, 3),
                              dtype=data.dtype, **extra)  # fmt: skip
        z[...] = data
    arr = zarrpipe.Store(str(tmp_path), mode="r").open_array("")
    return arr, z


def _same_result(got, want, what):
    assert type(got) is type(want) or (
        isinstance(got, np.ndarray) and isinstance(want, np.ndarray)
    ), f"{what}: {type(got)} where zarr-python gives {type(want)}"
    got_a, want_a = np.asarray(got), np.asarray(want)
    assert got_a.shape == want_a.shape, f"{what}: {got_a.shape} != {want_a.shape}"
    assert got_a.dtype == want_a.dtype.newbyteorder("="), f"{what}: {got_a.dtype}"
    np.testing.assert_array_equal(got_a, want_a, err_msg=what)
    if isinstance(got, np.ndarray):
        assert got.flags.writeable, f"{what}: read-only"
        assert type(got.base).__name__ == "_ArrayMemory", f"{what}: not the read's buffer"


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_indexing_gives_what_zarr_python_gives(arrays, key):
    arr, z = arrays
    _same_result(arr[key], z[key], f"arr[{key!r}]")


def test_selections_zarr_python_refuses_follow_numpy(arrays):
    arr, z = arrays
    want = np.asarray(z[...])
    for key in [np.s_[::2, 1, ::-1], np.s_[None, 0], np.s_[[True, False, True, True]]]:
        got = arr[key]
        assert isinstance(got, np.ndarray) and got.flags.writeable, repr(key)
        np.testing.assert_array_equal(got, want[key], err_msg=repr(key))


def test_oindex_vindex_blocks_give_numpy_as_zarr_python(arrays):
    arr, z = arrays
    for key in [np.s_[[0, 3], :, 1], np.s_[1, 2, 3], np.s_[[1], [0, 4], ::2]]:
        _same_result(arr.oindex[key], z.oindex[key], f"oindex[{key!r}]")
    for key in [np.s_[[0, 3], [1, 1], [2, 5]], np.s_[[[0], [3]], [1, 2], 4]]:
        _same_result(arr.vindex[key], z.vindex[key], f"vindex[{key!r}]")
    # All-integer coordinates: NumPy's broadcasting gives shape (), which zarrpipe follows;
    # zarr-python gives shape (1,).
    assert arr.vindex[1, 2, 3].shape == () and z.vindex[1, 2, 3].shape == (1,)
    for key in [np.s_[-1], np.s_[0, 0:2, :]]:
        _same_result(arr.blocks[key], z.blocks[key], f"blocks[{key!r}]")


def test_indexing_a_zero_d_array(tmp_path):
    with quiet_zarr_writes():
        z = zarr.create_array(store=str(tmp_path), shape=(), dtype="f8")
        z[...] = 2.5
    arr = zarrpipe.Store(str(tmp_path), mode="r").open_array("")
    for key in [(), Ellipsis]:
        _same_result(arr[key], z[key], f"arr[{key!r}]")


def test_the_result_is_yours_to_change(tmp_path):
    store = zarrpipe.Store(str(tmp_path), cache_bytes=1 << 20)
    arr = store.create_array("a", shape=(6, 4), dtype="int16", chunks=(3, 2))
    arr[...] = np.arange(24, dtype="int16").reshape(6, 4)
    a = arr[1:5]
    a += 100  # in place: no copy was made, nothing else sees it
    np.testing.assert_array_equal(arr[1:5], np.arange(4, 20, dtype="int16").reshape(4, 4))
    assert arr[1:5].mean() == np.arange(4, 20).mean()  # NumPy's methods, not a Tensor's


def test_tensor_len_and_repr_show_values(tmp_path):
    store = zarrpipe.Store(str(tmp_path))
    arr = store.create_array("a", shape=(3, 2), dtype="int32", chunks=(2, 2))
    arr[...] = [[1, 2], [3, 4], [5, 6]]
    t = arr.read()
    assert len(t) == 3
    text = repr(t)
    assert text.startswith("Tensor([[1, 2],") and "shape=(3, 2)" in text and "int32" in text
    with pytest.raises(TypeError, match="unsized"):
        len(arr.read((0, 0)))
    t.into_dlpack()
    assert "consumed" in repr(t)
