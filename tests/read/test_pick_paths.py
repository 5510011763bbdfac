"""Picks from a local store take the direct path (each touched chunk, or inner chunk of a
shard, decoded into a small per-thread buffer and gathered from there; a shard opened once):
its results equal zarr-python's on the same store, with missing shards, missing inner
chunks, edge chunks, byte-swapped data and repeated or reversed indices; picks through a
chunk cache, and picks whose chunk boxes are too large to keep one per thread, take the
batched path and agree with it."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
import zarrpipe
from zarr.codecs import BytesCodec, Crc32cCodec, ShardingCodec, ZstdCodec
from zarrpipe._zarrpipe import _read_path_stats

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")

SHAPE = (300, 250)


def _direct() -> int:
    return _read_path_stats()["direct_pick_boxes"]


def _write(path, sharded: bool, big_endian: bool) -> tuple[np.ndarray, zarr.Array]:
    """An int32 array with holes: one whole shard (or chunk) never written and, when sharded,
    inner chunks of other shards left at the fill value."""
    rng = np.random.default_rng(7)
    data = rng.integers(-(2**31), 2**31 - 1, size=SHAPE, dtype=np.int32)
    endian = "big" if big_endian else "little"
    if sharded:
        inner = [BytesCodec(endian=endian), ZstdCodec(level=1), Crc32cCodec()]
        codecs = dict(
            chunks=(128, 128),
            serializer=ShardingCodec(chunk_shape=(32, 32), codecs=inner),
            compressors=None,
        )
    else:
        codecs = dict(chunks=(32, 48), serializer=BytesCodec(endian=endian))
    arr = zarr.create_array(
        str(path),
        shape=SHAPE,
        dtype="int32",
        fill_value=-5,
        config={"write_empty_chunks": False},
        **codecs,
    )
    expected = np.full(SHAPE, -5, dtype=np.int32)
    # Leave the chunk (shard) at the origin unwritten; in the rest, leave holes.
    for i in range(0, SHAPE[0], 64):
        for j in range(0, SHAPE[1], 64):
            if i < 128 and j < 128:
                continue
            if (i // 64 + j // 64) % 3 == 0:
                continue
            part = (slice(i, i + 64), slice(j, j + 64))
            arr[part] = data[part]
            expected[part] = data[part]
    return expected, arr


PICKS = [
    ("oindex", (np.arange(0, 300, 8), np.arange(0, 250, 8))),
    ("oindex", (np.arange(299, -1, -7), np.array([3, 3, 200, 0, 249, 3]))),
    ("oindex", (slice(None, None, 3), slice(240, 10, -9))),
    ("vindex", (np.array([0, 299, 150, 150, 31, 32]), np.array([0, 249, 100, 100, 31, 32]))),
    ("getitem", (np.array([[5, 260], [299, 0]]), slice(100, 140))),
]


@pytest.mark.parametrize("sharded", [True, False], ids=["sharded", "chunked"])
@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
@pytest.mark.parametrize(("kind", "key"), PICKS)
def test_direct_picks_equal_zarr_python(tmp_path, sharded, big_endian, kind, key):
    expected, zarr_arr = _write(tmp_path, sharded, big_endian)
    arr = zarrpipe.Store(str(tmp_path)).open_array("")
    before = _direct()
    got = getattr(arr, kind)[key] if kind != "getitem" else arr[key]
    got = np.asarray(got)
    assert _direct() > before, "the pick did not take the direct path"
    if kind == "oindex":
        want = expected[np.ix_(*_as_index(key, SHAPE))]
    else:
        want = expected[key]
    np.testing.assert_array_equal(got, want)
    negative_step = any(isinstance(k, slice) and (k.step or 1) < 0 for k in key)
    if kind != "getitem" and not negative_step:
        # zarr-python reading the same store (it refuses negative steps, and NumPy's mixed
        # advanced indexing).
        np.testing.assert_array_equal(got, getattr(zarr_arr, kind)[key])


def _as_index(key, shape):
    return [np.arange(n)[k] if isinstance(k, slice) else k for k, n in zip(key, shape, strict=True)]


@pytest.mark.parametrize("sharded", [True, False], ids=["sharded", "chunked"])
def test_cached_picks_take_the_batched_path_and_agree(tmp_path, sharded):
    expected, _ = _write(tmp_path, sharded, False)
    key = (np.arange(1, 300, 5), np.arange(0, 250, 4))
    direct = zarrpipe.Store(str(tmp_path)).open_array("").oindex[key]
    cached_arr = zarrpipe.Store(str(tmp_path), cache_bytes=1 << 24).open_array("")
    before = _direct()
    first = cached_arr.oindex[key]
    again = cached_arr.oindex[key]
    assert _direct() == before, "a cached pick took the direct path"
    for t in (direct, first, again):
        np.testing.assert_array_equal(np.asarray(t), expected[np.ix_(*key)])


def test_boxes_too_large_for_the_direct_path_take_the_batched_one(tmp_path):
    # One chunk of 1100x1024 float32 (4.3 MiB): a pick spanning it has a box above the
    # direct path's per-thread limit.
    shape = (1100, 1024)
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    z = zarr.create_array(str(tmp_path), shape=shape, chunks=shape, dtype="float32")
    z[...] = data
    arr = zarrpipe.Store(str(tmp_path)).open_array("")
    key = (np.array([0, 1099, 500]), np.array([1023, 0, 7]))
    before = _direct()
    got = np.asarray(arr.oindex[key])
    assert _direct() == before
    np.testing.assert_array_equal(got, data[np.ix_(*key)])
    # A pick inside a small part of it has a small box: direct.
    got = np.asarray(arr.oindex[np.array([3, 5]), np.array([9, 2])])
    assert _direct() == before + 1
    np.testing.assert_array_equal(got, data[np.ix_([3, 5], [9, 2])])


def test_a_corrupt_inner_chunk_in_a_pick_names_it(tmp_path):
    _, _ = _write(tmp_path, True, False)
    shard = tmp_path / "c" / "1" / "1"
    raw = bytearray(shard.read_bytes())
    raw[10] ^= 0xFF  # inside the first stored inner chunk: its crc32c no longer matches
    shard.write_bytes(bytes(raw))
    arr = zarrpipe.Store(str(tmp_path)).open_array("")
    with pytest.raises(zarrpipe.ChecksumError, match=r"c/1/1.*inner chunk"):
        arr.oindex[np.arange(128, 256, 4), np.arange(128, 250, 4)]
