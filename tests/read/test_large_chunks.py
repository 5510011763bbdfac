"""A large zstd chunk read by itself: zarrpipe reads its file on one pool thread while the
other decodes what has arrived (`read_zstd_overlapped` in codecs/src/read/local.rs). Values
must equal zarr-python's for every way to read one chunk, for v2 and v3, either byte order, and
a damaged chunk must be an error that names it. Large chunks scattered into a wider output
decode through a buffer of their size or through zstd's window, by the frame's window
(`decode_through_window` in codecs/src/codec/decode/bytes_codecs/zstd.rs): both equal
zarr-python's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
import zarrpipe
from zarr.codecs import BytesCodec, ZstdCodec

# Float32 chunks of 1 x 1024 x 1536: 6 MiB, over the 4 MiB where the read overlaps.
SHAPE = (3, 1024, 1536)
CHUNKS = (1, 1024, 1536)


def values() -> np.ndarray:
    rng = np.random.default_rng(7)
    smooth = np.cumsum(rng.normal(size=SHAPE).astype(np.float32), axis=2)
    return smooth.astype(np.float32)


@pytest.fixture(scope="module")
def source() -> np.ndarray:
    return values()


@pytest.fixture(scope="module", params=["v3-little", "v3-big", "v2"])
def stored(request, tmp_path_factory, source) -> str:
    root = tmp_path_factory.mktemp("large-chunks")
    if request.param == "v2":
        import numcodecs

        a = zarr.create_array(
            str(root),
            shape=SHAPE,
            chunks=CHUNKS,
            dtype="float32",
            compressors=numcodecs.Zstd(level=1),
            zarr_format=2,
            fill_value=0,
        )
    else:
        endian = "little" if request.param == "v3-little" else "big"
        a = zarr.create_array(
            str(root),
            shape=SHAPE,
            chunks=CHUNKS,
            dtype="float32",
            serializer=BytesCodec(endian=endian),
            compressors=ZstdCodec(level=1),
            fill_value=0,
        )
    a[...] = source
    return str(root)


def test_read_chunk_equals_zarr_python(stored, source):
    arr = zarrpipe.Store(stored).open_array("")
    for z in range(SHAPE[0]):
        out = np.from_dlpack(arr.read_chunk((z, 0, 0)).into_dlpack())
        np.testing.assert_array_equal(out, source[z : z + 1])


def test_read_of_one_chunk_region_equals_zarr_python(stored, source):
    store = zarrpipe.Store(stored)
    out = np.from_dlpack(store.read("", (slice(1, 2),)).into_dlpack())
    np.testing.assert_array_equal(out, source[1:2])
    part = (slice(2, 3), slice(5, 900), slice(3, 1500))
    out = np.from_dlpack(store.read("", part).into_dlpack())
    np.testing.assert_array_equal(out, source[part])


def test_read_into_a_reused_buffer_equals_zarr_python(stored, source):
    arr = zarrpipe.Store(stored).open_array("")
    out = np.full((1, 1024, 1536), np.nan, dtype=np.float32)
    for z in range(SHAPE[0]):
        arr.read_into((slice(z, z + 1),), out)
        np.testing.assert_array_equal(out, source[z : z + 1])


def test_a_damaged_large_chunk_is_an_error_naming_it(tmp_path, source):
    a = zarr.create_array(
        str(tmp_path),
        shape=SHAPE,
        chunks=CHUNKS,
        dtype="float32",
        compressors=ZstdCodec(level=1),
        fill_value=0,
    )
    a[...] = source
    chunk = Path(tmp_path, "c", "1", "0", "0")
    stored = chunk.read_bytes()
    arr = zarrpipe.Store(str(tmp_path)).open_array("")
    truncated = "truncated frame"
    for damaged, what in [
        (stored[: len(stored) // 2], truncated),
        (stored[:-1], truncated),
        (stored + b"junk", "Unknown frame descriptor"),
        (b"", truncated),
    ]:
        chunk.write_bytes(damaged)
        with pytest.raises(
            zarrpipe.DecodeError, match=f'^chunk "c/1/0/0" is corrupt: zstd: {what}$'
        ):
            arr.read_chunk((1, 0, 0))
    # The other chunks still read, and the repaired one too.
    chunk.write_bytes(stored)
    out = np.from_dlpack(arr.read_chunk((1, 0, 0)).into_dlpack())
    np.testing.assert_array_equal(out, source[1:2])


def frame_window(frame: bytes) -> int:
    """The window a zstd frame header declares (the content size for a single segment)."""
    descriptor = frame[4]
    if not descriptor & 0x20:
        base = 1 << (10 + (frame[5] >> 3))
        return base + base // 8 * (frame[5] & 7)
    size_len = (1, 2, 4, 8)[descriptor >> 6]
    at = 5 + (0, 1, 2, 4)[descriptor & 3]
    size = int.from_bytes(frame[at : at + size_len], "little")
    return size + 256 if size_len == 2 else size


# Level 19 writes 4.5 MiB chunks as single segments (the window is the chunk), level 1 with
# a 1 MiB window: one takes the chunk-sized buffer, the other zstd's window.
@pytest.mark.parametrize(("level", "window_covers_chunk"), [(19, True), (1, False)])
def test_scattered_large_chunks_equal_zarr_python(tmp_path, source, level, window_covers_chunk):
    chunks = (3, 512, 768)
    a = zarr.create_array(
        str(tmp_path),
        shape=SHAPE,
        chunks=chunks,
        dtype="float32",
        compressors=ZstdCodec(level=level),
        fill_value=0,
    )
    a[...] = source
    chunk_bytes = 4 * int(np.prod(chunks))
    window = frame_window(Path(tmp_path, "c", "0", "1", "1").read_bytes())
    assert (window >= chunk_bytes) == window_covers_chunk
    store = zarrpipe.Store(str(tmp_path))
    np.testing.assert_array_equal(np.from_dlpack(store.read("").into_dlpack()), source)
    part = (slice(1, 3), slice(100, 1000), slice(700, 1400))
    np.testing.assert_array_equal(np.from_dlpack(store.read("", part).into_dlpack()), source[part])
    out = np.full(SHAPE, np.nan, dtype=np.float32)
    store.open_array("").read_into((), out)
    np.testing.assert_array_equal(out, source)
