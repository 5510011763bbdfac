"""The decoded-chunk cache: `Store(path, cache_bytes=N)`.

Chunks served from the cache share memory with it (into_dlpack() refuses them, copy=True works);
fresh reads (misses, region reads) are unique. Region reads of unsharded arrays use cached chunks
and cache the chunks they fully cover. Eviction is LRU, bounded by capacity bytes. Values must be
what zarr-python reads, however a chunk was served."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numcodecs
import numpy as np
import pytest
import zarrpipe
from support.zarr_stores import (
    all_chunk_indices,
    assert_moves_out,
    assert_tensor,
    assert_values,
    chunk_slices,
    random_selections,
    reference,
    sample_values,
    write_array,
)
from zarr.codecs import BytesCodec, Crc32cCodec, TransposeCodec, ZstdCodec

BIG = 1 << 24  # a cache that never evicts in these tests


def info(store) -> dict:
    d = store.cache_info()
    assert set(d) == {"hits", "misses", "entries", "bytes", "capacity"}
    assert d["bytes"] <= d["capacity"]
    return d


def assert_shared(t: zarrpipe.Tensor, expected: np.ndarray, what: str = "") -> None:
    """A tensor served from the cache: into_dlpack() refuses (tensor intact), copies work."""
    with pytest.raises(BufferError):
        t.into_dlpack()
    assert_tensor(t, expected, f"{what} (after refused into_dlpack)")
    ro = np.from_dlpack(t)  # zero-copy, read-only
    assert not ro.flags.writeable, f"{what}: a cached chunk exported writable without a copy"
    assert_values(ro, expected, what)
    cp = np.from_dlpack(t, copy=True)
    assert cp.flags.writeable
    assert_values(cp, expected, what)
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    assert type(cap).__name__ == "PyCapsule"
    if cp.size:  # writing the copy leaves the cache alone
        cp.reshape(-1)[:] = cp.reshape(-1)[::-1]
    assert_tensor(t, expected, f"{what} (after writing a copy)")


# ---------------------------------------------------------------------------------------------


def test_no_cache_by_default(tmp_path):
    data = sample_values("int32", (6, 6), seed=1)
    write_array(tmp_path, data, chunks=(3, 3))
    store = zarrpipe.Store(str(tmp_path))
    arr = store.open_array()
    for _ in range(2):
        assert_moves_out(arr.read_chunk((1, 1)), data[3:, 3:])
    assert store.cache_info() == {"hits": 0, "misses": 0, "entries": 0, "bytes": 0, "capacity": 0}
    store.clear_cache()  # harmless without a cache


def test_miss_is_unique_hit_is_shared(tmp_path):
    data = sample_values("float64", (8, 9), seed=2)
    write_array(tmp_path, data, chunks=(4, 3))
    store = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
    arr = store.open_array()
    assert info(store) == {"hits": 0, "misses": 0, "entries": 0, "bytes": 0, "capacity": BIG}

    first = arr.read_chunk((1, 2))
    s = info(store)
    assert (s["misses"], s["hits"], s["entries"]) == (1, 0, 1)
    assert s["bytes"] == 4 * 3 * 8
    assert_moves_out(first, data[4:8, 6:9], "miss")

    second = arr.read_chunk((1, 2))
    s = info(store)
    assert (s["misses"], s["hits"], s["entries"]) == (1, 1, 1)
    assert_shared(second, data[4:8, 6:9], "hit")

    # hits through every chunk door
    (third,) = store.read_chunks("", [(1, 2)])
    assert_shared(third, data[4:8, 6:9], "store.read_chunks hit")
    (fourth,) = arr.read_chunks([(1, 2)])
    assert_shared(fourth, data[4:8, 6:9], "arr.read_chunks hit")
    assert info(store)["hits"] == 3


def test_moved_out_miss_does_not_corrupt_cache(tmp_path):
    """Writing into the array moved out of a miss must not change what the cache serves."""
    data = sample_values("int16", (4, 4), seed=3)
    write_array(tmp_path, data, chunks=(2, 2))
    store = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
    arr = store.open_array()
    out = np.from_dlpack(arr.read_chunk((0, 1)).into_dlpack())
    out[...] = 0
    assert_shared(arr.read_chunk((0, 1)), data[:2, 2:])
    whole = np.from_dlpack(arr.read().into_dlpack())
    whole[...] = 0
    assert_shared(arr.read_chunk((0, 1)), data[:2, 2:])
    assert_tensor(arr[...], data)


def test_shared_tensor_outlives_eviction_and_clear(tmp_path):
    data = sample_values("uint32", (4, 6), seed=4)
    write_array(tmp_path, data, chunks=(2, 3))
    store = zarrpipe.Store(str(tmp_path), cache_bytes=2 * 3 * 4)  # room for one chunk
    arr = store.open_array()
    arr.read_chunk((0, 0))
    held = arr.read_chunk((0, 0))  # a hit, shares the cache entry
    view = np.from_dlpack(held)
    arr.read_chunk((1, 1))  # evicts (0, 0)
    assert info(store)["entries"] == 1
    store.clear_cache()
    assert info(store)["entries"] == 0 and info(store)["bytes"] == 0
    assert_values(view, data[:2, :3])
    assert_tensor(held, data[:2, :3])
    # still shared with `view` (a live export), so still refused
    with pytest.raises(BufferError):
        held.into_dlpack()
    del view
    # nothing but the tensor holds the bytes now
    assert_moves_out(held, data[:2, :3])


# ---------------------------------------------------------------------------------------------
# LRU eviction bounded by bytes


def test_lru_eviction_order(tmp_path):
    data = sample_values("int64", (8, 8), seed=5)
    write_array(tmp_path, data, chunks=(2, 2))  # 16 chunks of 32 bytes
    chunk_bytes = 2 * 2 * 8
    store = zarrpipe.Store(str(tmp_path), cache_bytes=3 * chunk_bytes)
    arr = store.open_array()
    A, B, C, D = (0, 0), (0, 1), (1, 0), (3, 3)

    def read(index, hit):
        before = info(store)
        t = arr.read_chunk(index)
        after = info(store)
        want = data[chunk_slices(data.shape, (2, 2), index)]
        assert_tensor(t, want, f"{index}")
        if hit:
            assert after["hits"] == before["hits"] + 1, f"{index} should be a hit"
            assert after["misses"] == before["misses"]
        else:
            assert after["misses"] == before["misses"] + 1, f"{index} should be a miss"
            assert after["hits"] == before["hits"]
        assert after["entries"] <= 3
        assert after["bytes"] == after["entries"] * chunk_bytes
        return t

    read(A, False)
    read(B, False)
    read(C, False)  # [A B C]
    read(A, True)  # [B C A]
    read(D, False)  # evicts B: [C A D]
    assert info(store)["entries"] == 3
    read(A, True)  # [C D A]
    read(B, False)  # evicts C: [D A B]
    read(D, True)  # [A B D]
    read(C, False)  # evicts A: [B D C]
    read(B, True)
    read(A, False)  # evicts D
    read(D, False)
    assert info(store)["bytes"] == 3 * chunk_bytes


def test_chunk_larger_than_capacity_is_not_cached(tmp_path):
    data = sample_values("float32", (10, 10), seed=6)
    write_array(tmp_path, data, chunks=(5, 5))
    store = zarrpipe.Store(str(tmp_path), cache_bytes=50)  # a chunk is 100 bytes
    arr = store.open_array()
    for _ in range(3):
        t = arr.read_chunk((1, 0))
        assert_moves_out(t, data[5:, :5])
    s = info(store)
    assert s["entries"] == 0 and s["bytes"] == 0 and s["hits"] == 0
    assert_tensor(arr[...], data)


def test_many_chunks_small_cache(tmp_path):
    """Random chunk reads through a small cache: always the right values, bytes <= capacity."""
    data = sample_values("complex64", (13, 11), seed=7)
    write_array(tmp_path, data, chunks=(3, 2), missing="partial", fill_value=2 + 1j)
    _, expected = reference(tmp_path)
    store = zarrpipe.Store(str(tmp_path), cache_bytes=5 * 3 * 2 * 8 + 7)
    arr = store.open_array()
    indices = all_chunk_indices(data.shape, (3, 2))
    rng = np.random.default_rng(0)
    for k in rng.integers(0, len(indices), 200):
        index = indices[k]
        t = arr.read_chunk(index)
        assert_tensor(t, expected[chunk_slices(data.shape, (3, 2), index)], f"{index}")
        info(store)  # bytes <= capacity (edge chunks are trimmed, so more than 5 may fit)
    s = info(store)
    assert s["hits"] > 0 and s["misses"] > 0 and s["hits"] + s["misses"] >= 200


# ---------------------------------------------------------------------------------------------
# region reads and the cache


def test_region_read_uses_cached_chunks(tmp_path):
    data = sample_values("int32", (9, 8), seed=8)
    write_array(tmp_path, data, chunks=(3, 4))
    store = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
    arr = store.open_array()
    indices = all_chunk_indices(data.shape, (3, 4))
    arr.read_chunks(indices)
    s0 = info(store)
    assert s0["misses"] == len(indices) and s0["entries"] == len(indices)
    t = arr[...]
    s1 = info(store)
    assert s1["hits"] - s0["hits"] == len(indices), "region read did not use the cached chunks"
    assert s1["misses"] == s0["misses"]
    assert_moves_out(t, data, "region read assembled from cached chunks is unique")
    t = store.read("", (slice(2, 7), slice(1, 6)))
    assert info(store)["hits"] - s1["hits"] == 6  # touches chunks (0..2, 0..1)
    assert_moves_out(t, data[2:7, 1:6])


def test_region_read_populates_fully_covered_chunks(tmp_path):
    data = sample_values("float64", (9, 8), seed=9)
    write_array(tmp_path, data, chunks=(3, 4))
    store = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
    arr = store.open_array()
    # rows 0..6 x cols 0..5: fully covers chunks (0, 0) and (1, 0); partly (0, 1), (1, 1), (2, *)
    assert_moves_out(arr[0:7, 0:5], data[0:7, 0:5])
    s = info(store)
    assert s["entries"] >= 2
    for index in [(0, 0), (1, 0)]:
        before = info(store)["hits"]
        t = arr.read_chunk(index)
        assert info(store)["hits"] == before + 1, f"{index} fully covered but not cached"
        assert_shared(t, data[chunk_slices(data.shape, (3, 4), index)], f"{index}")


def test_whole_read_populates_edge_chunks(tmp_path):
    """A whole-array read caches every chunk, including the ragged edge ones; read_chunk then
    serves them trimmed, with the right values."""
    data = sample_values("uint16", (10, 7, 3), seed=10)
    write_array(tmp_path, data, chunks=(4, 3, 2), missing="partial", fill_value=555)
    _, expected = reference(tmp_path)
    store = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
    arr = store.open_array()
    assert_tensor(arr[...], expected)
    indices = all_chunk_indices(data.shape, (4, 3, 2))
    assert info(store)["entries"] == len(indices)
    for index in indices:
        before = info(store)["hits"]
        t = arr.read_chunk(index)
        assert info(store)["hits"] == before + 1
        assert_shared(t, expected[chunk_slices(data.shape, (4, 3, 2), index)], f"{index}")


CACHE_LAYOUTS = {
    "v3-ragged": dict(chunks=(3, 4, 2)),
    "v3-transpose-be": dict(
        chunks=(3, 4, 2),
        filters=[TransposeCodec(order=(2, 0, 1))],
        serializer=BytesCodec(endian="big"),
        compressors=[ZstdCodec(), Crc32cCodec()],
    ),
    "v3-sharded": dict(chunks=(3, 2, 2), shards=(6, 4, 4)),
    "v2-F-be": dict(
        chunks=(3, 4, 2), zarr_format=2, order="F", compressors=numcodecs.Zlib(), dtype=">f8"
    ),
    "v2-C": dict(chunks=(3, 4, 2), zarr_format=2, compressors=numcodecs.Blosc()),
}


@pytest.mark.parametrize("warm", ["chunks", "regions"])
@pytest.mark.parametrize("layout", list(CACHE_LAYOUTS))
def test_cached_reads_match_zarr(tmp_path, layout, warm):
    """With a warm cache (filled by chunk reads or by region reads), region reads and chunk
    reads still return exactly zarr-python's values, for every layout."""
    kwargs = dict(CACHE_LAYOUTS[layout])
    data = sample_values(kwargs.get("dtype", "float64"), (7, 9, 5), seed=11)
    data = data.astype(kwargs.get("dtype", data.dtype))
    write_array(tmp_path, data, missing="partial", fill_value=np.nan, **kwargs)
    _, expected = reference(tmp_path)
    store = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
    arr = store.open_array()
    chunks = tuple(arr.chunks)
    indices = all_chunk_indices(data.shape, chunks)
    if warm == "chunks":
        for index, t in zip(indices, arr.read_chunks(indices), strict=True):
            assert_moves_out(t, expected[chunk_slices(data.shape, chunks, index)])
    else:
        assert_tensor(arr[...], expected)
        assert_tensor(arr[1:6, 2:, :-1], expected[1:6, 2:, :-1])
    if warm == "chunks" or "shards" not in kwargs:  # sharded region reads may bypass the cache
        assert info(store)["entries"] > 0
    for sel in random_selections(77, data.shape, 25):
        t = store.read("", sel)
        assert_moves_out(t, np.asarray(expected[sel]), f"{sel!r}")
    for _ in range(2):
        for index, t in zip(indices, arr.read_chunks(indices), strict=True):
            want = expected[chunk_slices(data.shape, chunks, index)]
            assert_tensor(t, want, f"{index}")
    # every chunk has been read at least twice by now: the last chunk pass hits
    s = info(store)
    assert s["hits"] >= len(indices)
    for index in indices[:: max(1, len(indices) // 5)]:
        assert_shared(arr.read_chunk(index), expected[chunk_slices(data.shape, chunks, index)])


def test_zero_d_and_empty_with_cache(tmp_path):
    write_array(tmp_path / "s", np.array(7.25, "float32"), chunks=())
    write_array(tmp_path / "e", np.zeros((0, 4), "int8"), chunks=(2, 2))
    store = zarrpipe.Store(str(tmp_path / "s"), cache_bytes=BIG)
    arr = store.open_array()
    assert_moves_out(arr.read_chunk(()), np.array(7.25, "float32"))
    assert_shared(arr.read_chunk(()), np.array(7.25, "float32"))
    assert_moves_out(arr[...], np.array(7.25, "float32"))
    store = zarrpipe.Store(str(tmp_path / "e"), cache_bytes=BIG)
    arr = store.open_array()
    assert_moves_out(arr[...], np.zeros((0, 4), "int8"))
    assert arr.read_chunks([]) == []


# ---------------------------------------------------------------------------------------------
# clear_cache, separate stores, changed data


def test_clear_cache_then_reread_sees_new_data(tmp_path):
    data = sample_values("int32", (6, 6), seed=12)
    z = write_array(tmp_path, data, chunks=(3, 3))
    store = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
    arr = store.open_array()
    arr.read_chunks(all_chunk_indices(data.shape, (3, 3)))
    assert info(store)["entries"] == 4
    z[0:3, 0:3] = -data[0:3, 0:3]  # the chunk changes on disk
    store.clear_cache()
    s = info(store)
    assert s["entries"] == 0 and s["bytes"] == 0 and s["capacity"] == BIG
    misses = s["misses"]
    t = arr.read_chunk((0, 0))
    assert info(store)["misses"] == misses + 1
    assert_moves_out(t, -data[0:3, 0:3])
    new = data.copy()
    new[0:3, 0:3] *= -1
    assert_tensor(arr[...], new)


def test_stores_have_separate_caches(tmp_path):
    data = sample_values("int8", (4, 4), seed=13)
    write_array(tmp_path, data, chunks=(2, 2))
    s1 = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
    s2 = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
    s1.open_array().read_chunk((0, 0))
    assert info(s1)["entries"] == 1
    assert info(s2)["entries"] == 0
    (t,) = s2.read_chunks("", [(0, 0)])
    assert_moves_out(t, data[:2, :2])


def test_two_arrays_one_cache(tmp_path):
    """Chunks of different arrays with the same index are different cache entries."""
    a = sample_values("int32", (4, 4), seed=14)
    b = sample_values("int32", (4, 4), seed=15)
    write_array(tmp_path, a, path="a", chunks=(2, 2))
    write_array(tmp_path, b, path="g/b", chunks=(2, 2))
    store = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
    arr_a, arr_b = store.open_array("a"), store.open_array("g/b")
    for _ in range(2):
        assert_tensor(arr_a.read_chunk((1, 1)), a[2:, 2:])
        assert_tensor(arr_b.read_chunk((1, 1)), b[2:, 2:])
        (ta,) = store.read_chunks("a", [(0, 1)])
        (tb,) = store.read_chunks("g/b", [(0, 1)])
        assert_tensor(ta, a[:2, 2:])
        assert_tensor(tb, b[:2, 2:])
    s = info(store)
    assert s["entries"] == 4 and s["hits"] == 4 and s["misses"] == 4


def test_concurrent_cached_reads(tmp_path):
    data = sample_values("float32", (24, 24), seed=16)
    write_array(tmp_path, data, chunks=(4, 4), missing="partial", fill_value=-0.0)
    _, expected = reference(tmp_path)
    store = zarrpipe.Store(str(tmp_path), cache_bytes=10 * 4 * 4 * 4)  # 10 of 36 chunks
    arr = store.open_array()
    indices = all_chunk_indices(data.shape, (4, 4))
    jobs = [indices[i % len(indices)] for i in range(0, 7 * len(indices), 5)]

    def work(index):
        t = arr.read_chunk(index)
        region = store.read("", (slice(index[0] * 4 - 1 if index[0] else 0, index[0] * 4 + 3),))
        return index, t.to_numpy().copy(), region.to_numpy().copy()

    default = zarrpipe.get_num_threads()
    try:
        zarrpipe.set_num_threads(4)
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(work, jobs))
    finally:
        zarrpipe.set_num_threads(default)
    for index, chunk, region in results:
        assert_values(chunk, expected[chunk_slices(data.shape, (4, 4), index)], f"{index}")
        lo = index[0] * 4 - 1 if index[0] else 0
        assert_values(region, expected[lo : index[0] * 4 + 3], f"{index} region")
    assert info(store)["entries"] <= 10


@pytest.mark.parametrize("threads", [1, 4])
def test_cache_with_thread_counts(tmp_path, threads):
    data = sample_values("int64", (12, 10), seed=17)
    write_array(tmp_path, data, chunks=(5, 3), missing="deleted", fill_value=-9)
    _, expected = reference(tmp_path)
    default = zarrpipe.get_num_threads()
    try:
        zarrpipe.set_num_threads(threads)
        store = zarrpipe.Store(str(tmp_path), cache_bytes=BIG)
        arr = store.open_array()
        indices = all_chunk_indices(data.shape, (5, 3))
        for _ in range(2):
            for index, t in zip(indices, arr.read_chunks(indices), strict=True):
                assert_tensor(t, expected[chunk_slices(data.shape, (5, 3), index)])
            assert_tensor(arr[...], expected)
        assert info(store)["hits"] >= 2 * len(indices)
    finally:
        zarrpipe.set_num_threads(default)
