"""Local file reads land at any distance from a page boundary (codecs/src/store/local_read.rs): a
destination a few bytes past the file offset modulo 4 KiB is read through a bounce buffer,
any other straight. Every path must give zarr-python's values, whatever the caller's buffer
address, for uncompressed chunks read straight into place, streamed pieces, whole chunks
read into memory (blosc) and shards."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import zarr
import zarrpipe
from zarr.codecs import BloscCodec, ZstdCodec

# uint8 chunks of 1 x 512 x 1024: 512 KiB each, several bounce pieces of 128 KiB.
SHAPE = (4, 512, 1024)
CHUNKS = (1, 512, 1024)
PAGE = 4096


@pytest.fixture(scope="module")
def source() -> np.ndarray:
    rng = np.random.default_rng(11)
    return np.cumsum(rng.integers(0, 3, size=SHAPE, dtype=np.uint8), axis=2, dtype=np.uint8)


@pytest.fixture(scope="module", params=["raw", "zstd", "blosc", "sharded", "v2-zlib"])
def stored(request, tmp_path_factory, source) -> str:
    root = str(tmp_path_factory.mktemp(f"placement-{request.param}"))
    if request.param == "v2-zlib":
        a = zarr.create_array(
            root,
            shape=SHAPE,
            chunks=CHUNKS,
            dtype="uint8",
            zarr_format=2,
            compressors=numcodecs.Zlib(level=1),
        )
    else:
        kwargs = {
            "raw": {"compressors": None},
            "zstd": {"compressors": ZstdCodec(level=1)},
            "blosc": {"compressors": BloscCodec(cname="lz4", clevel=1)},
            "sharded": {
                "shards": (2, 512, 1024),
                "compressors": ZstdCodec(level=1),
            },
        }[request.param]
        a = zarr.create_array(root, shape=SHAPE, chunks=CHUNKS, dtype="uint8", **kwargs)
    a[...] = source
    return root


def buffer_at(shape: tuple[int, ...], distance: int) -> tuple[np.ndarray, np.ndarray]:
    """A C-contiguous uint8 array whose data starts `distance` bytes past a page boundary,
    and the larger array around it (filled with a sentinel)."""
    n = int(np.prod(shape))
    room = np.full(n + 2 * PAGE, 0xAB, dtype=np.uint8)
    skip = (distance - room.ctypes.data) % PAGE
    return room[skip : skip + n].reshape(shape), room


@pytest.mark.parametrize("distance", [0, 1, 16, 40, 64, 2048, 4095])
def test_read_into_at_any_distance_from_a_page(stored, source, distance):
    array = zarrpipe.Store(stored).open_array("")
    # One whole chunk (straight into place when uncompressed) and the whole array.
    for selection in [(slice(2, 3),), (...,)]:
        want = source[selection]
        out, room = buffer_at(want.shape, distance)
        array.read_into(selection, out)
        np.testing.assert_array_equal(out, want)
        outside = np.ones(room.shape, bool)
        start = out.ctypes.data - room.ctypes.data
        outside[start : start + out.size] = False
        assert (room[outside] == 0xAB).all(), "wrote outside the caller's buffer"


def test_fresh_reads_equal_zarr_python(stored, source):
    array = zarrpipe.Store(stored).open_array("")
    for _ in range(3):  # later reads reuse this thread's buffers
        for selection in [(...,), (slice(1, 3), slice(7, 300))]:
            out = np.from_dlpack(array.read(selection).into_dlpack())
            np.testing.assert_array_equal(out, source[selection])


def test_a_truncated_chunk_is_an_error_that_names_it(tmp_path, source):
    root = str(tmp_path / "t")
    a = zarr.create_array(root, shape=SHAPE, chunks=CHUNKS, dtype="uint8", compressors=None)
    a[...] = source
    chunk = tmp_path / "t" / "c" / "2" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[: 300 * 1024])
    array = zarrpipe.Store(root).open_array("")
    out, _ = buffer_at(SHAPE, 16)
    with pytest.raises(zarrpipe.DecodeError, match=r"c/2/0/0.*307200 bytes, expected 524288"):
        array.read_into((...,), out)
