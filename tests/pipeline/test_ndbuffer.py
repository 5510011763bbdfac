"""`zarrpipe.NDBuffer`: zarr-python's output arrays of 32 MiB and more in memory zarrpipe keeps
between reads. Values must be exactly zarr-python's; the memory must be zeroed when handed
out (never an earlier read's values) and come back for the next read of its size; everything
NumPy cannot view as plain bytes, and small outputs, must stay NumPy's own."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest
import zarr
import zarrpipe
from zarrpipe import _zarrpipe

OURS = {"codec_pipeline.path": "zarrpipe.CodecPipeline", "ndbuffer": "zarrpipe.NDBuffer"}
BIG = 40 << 20  # over the 32 MiB from which outputs come from zarrpipe's kept memory
KEEPS = os.environ.get("ZARRPIPE_RECYCLE_BYTES", "").strip() != "0"


@pytest.fixture
def ours() -> Iterator[None]:
    with zarr.config.set(OURS):
        yield


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def owner(a: np.ndarray) -> object:
    """The object at the end of `a`'s chain of bases (what owns its memory)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def is_zarrpipes(a: np.ndarray) -> bool:
    return type(owner(a)).__module__.startswith("zarrpipe")


def test_zarr_python_finds_it_by_name(ours):
    from zarr.core.buffer import default_buffer_prototype

    assert default_buffer_prototype().nd_buffer is zarrpipe.NDBuffer


@pytest.mark.parametrize("shards", [None, (1024, 1024)])
@pytest.mark.parametrize("pipeline", ["zarrpipe.CodecPipeline", "default"])
def test_large_reads_equal_the_source_in_zarrpipes_memory(tmp_path, shards, pipeline):
    data = np.random.default_rng(3).integers(0, 60000, (2048, 2560), dtype="uint64")
    assert data.nbytes >= BIG
    path = tmp_path / "a.zarr"
    a = zarr.create_array(path, shape=data.shape, chunks=(256, 256), shards=shards, dtype="u8")
    a[...] = data
    config = dict(OURS)
    if pipeline == "default":
        config["codec_pipeline.path"] = "zarr.core.codec_pipeline.BatchedCodecPipeline"
    with zarr.config.set(config):
        b = zarr.open_array(path, mode="r")
        got = b[...]
        np.testing.assert_array_equal(got, data)
        assert got.flags.writeable and got.flags.c_contiguous
        assert is_zarrpipes(got) == KEEPS
        part = b[100:2000, 7:2500]
        np.testing.assert_array_equal(part, data[100:2000, 7:2500])


@pytest.mark.skipif(not KEEPS, reason="ZARRPIPE_RECYCLE_BYTES=0: nothing is kept")
def test_a_freed_output_serves_the_next_read_zeroed(tmp_path, ours):
    shape = (BIG // 8,)
    a = zarr.create_array(tmp_path / "a.zarr", shape=shape, chunks=(1 << 20,), dtype="f8")
    a[...] = 7.5
    first = a[...]
    assert (first == 7.5).all()
    at = address(first)
    del first
    again = zarrpipe.NDBuffer.empty(shape=shape, dtype="f8").as_ndarray_like()
    assert address(again) == at, "the freed output's memory came back"
    assert not again.any(), "handed out zeroed, not with the last read's values"


def test_missing_chunks_read_as_the_fill_value(tmp_path, ours):
    shape = (BIG // 4 + 1000,)
    a = zarr.create_array(
        tmp_path / "a.zarr", shape=shape, chunks=(1 << 20,), dtype="i4", fill_value=-3
    )
    a[5:17] = 9
    got = a[...]
    assert is_zarrpipes(got) == KEEPS
    expected = np.full(shape, -3, dtype="i4")
    expected[5:17] = 9
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "dtype",
    ["<u2", ">i4", ">f8", "c16", "M8[ns]", "m8[2s]", "S7", "U3", [("a", "<i2"), ("b", ">f4")]],
)
@pytest.mark.parametrize("order", ["C", "F"])
def test_empty_gives_the_shape_dtype_and_order_asked_for(dtype, order):
    dt = np.dtype(dtype)
    shape = (BIG // dt.itemsize // 64 + 1, 64)
    buf = zarrpipe.NDBuffer.empty(shape=shape, dtype=dt, order=order)
    a = buf.as_ndarray_like()
    assert isinstance(buf, zarrpipe.NDBuffer)
    assert a.shape == shape and a.dtype == dt
    assert a.flags.c_contiguous if order == "C" else a.flags.f_contiguous
    assert a.flags.writeable and a.flags.aligned
    assert is_zarrpipes(a) == KEEPS
    a[-1, -1] = np.zeros((), dtype=dt)  # writable through to the last element


@pytest.mark.parametrize("dtype", [object, "T"])
def test_elements_that_are_not_plain_bytes_stay_numpys(dtype):
    if dtype == "T" and not hasattr(np.dtypes, "StringDType"):
        pytest.skip("NumPy < 2 has no StringDType")
    a = zarrpipe.NDBuffer.empty(shape=(BIG // 8,), dtype=dtype).as_ndarray_like()
    assert not is_zarrpipes(a)
    assert a.dtype == np.dtype(dtype)


def test_small_outputs_stay_numpys():
    a = zarrpipe.NDBuffer.empty(shape=(1000, 1000), dtype="f8").as_ndarray_like()
    assert a.shape == (1000, 1000) and not is_zarrpipes(a)
    assert _zarrpipe._output_array(1000) is None


def test_a_negative_dimension_is_numpys_error():
    with pytest.raises(ValueError, match="negative"):
        zarrpipe.NDBuffer.empty(shape=(-1, BIG), dtype="f8")


def test_an_output_too_large_for_memory_is_numpys_error():
    with pytest.raises(ValueError, match="too big"):
        zarrpipe.NDBuffer.empty(shape=(1 << 40, 1 << 40), dtype="f8")
