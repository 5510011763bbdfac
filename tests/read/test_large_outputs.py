"""Reads with outputs of 64 MiB and more: zarrpipe writes their rows around the cache
(streaming stores, `codecs/src/memory/stream_store.rs`). Every value must still land where
zarr-python puts it, for rows at any alignment, plain and sharded chunks, partial regions,
caller buffers and zarr-python's own output through zarrpipe's pipeline."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
import zarrpipe
from zarr.codecs import ZstdCodec

# 40 x 1024 x 1024 uint16: 80 MiB. Chunk rows of 300 elements (600 bytes) start at every
# offset modulo a 64-byte cache line.
SHAPE = (40, 1024, 1024)
CHUNKS = (16, 200, 300)


def values() -> np.ndarray:
    """Each element depends on its position along every axis (uint16 wraps)."""
    z = np.arange(SHAPE[0], dtype=np.uint16)[:, None, None] * np.uint16(2053)
    y = np.arange(SHAPE[1], dtype=np.uint16)[None, :, None] * np.uint16(7)
    x = np.arange(SHAPE[2], dtype=np.uint16)[None, None, :]
    return z + y + x


@pytest.fixture(scope="module")
def source() -> np.ndarray:
    return values()


@pytest.fixture(scope="module", params=["chunked", "sharded"])
def stored(request, tmp_path_factory, source) -> str:
    root = tmp_path_factory.mktemp("large")
    shards = (32, 400, 600) if request.param == "sharded" else None
    a = zarr.create_array(
        str(root),
        shape=SHAPE,
        chunks=CHUNKS,
        shards=shards,
        dtype="uint16",
        compressors=ZstdCodec(level=1),
        fill_value=0,
    )
    a[...] = source
    return str(root)


def test_read_all_equals_zarr_python(stored, source):
    out = np.from_dlpack(zarrpipe.Store(stored).read("").into_dlpack())
    np.testing.assert_array_equal(out, source)


def test_a_large_partial_region_equals_zarr_python(stored, source):
    sel = (slice(3, 40), slice(5, 1021), slice(7, 1000))
    out = np.from_dlpack(zarrpipe.Store(stored).read("", sel).into_dlpack())
    assert out.nbytes >= 64 << 20
    np.testing.assert_array_equal(out, source[sel])


def test_read_into_a_caller_buffer_twice(stored, source):
    array = zarrpipe.Store(stored).open_array("")
    out = np.full(SHAPE, 0xFFFF, dtype=np.uint16)
    array.read_into((...,), out)
    np.testing.assert_array_equal(out, source)
    out[...] = 0xFFFF
    array.read_into((...,), out)  # a reused buffer, already in memory
    np.testing.assert_array_equal(out, source)


def test_zarr_python_through_the_zarrpipe_pipeline(stored, source):
    with zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"}):
        out = zarr.open_array(stored, mode="r")[...]
    np.testing.assert_array_equal(out, source)
