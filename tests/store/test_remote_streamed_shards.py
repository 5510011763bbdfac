"""Whole shards read from an object store while they arrive: when a shard body comes slowly,
zarrpipe asks for its index alongside and decodes each inner chunk as soon as its bytes are
in (an index stored first is read from the body itself). The values must be zarr-python's,
the extra requests only where they pay, and a shard that changes between the two requests
must fail the read rather than mix two versions."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarrpipe
from support.faults.stores import with_crc32c
from support.remote_servers import http_server
from support.zarr_stores import quiet_zarr_writes

SHAPE, SHARD, INNER = (128, 256, 256), (32, 256, 256), (32, 64, 64)
SHARDS = SHAPE[0] // SHARD[0]  # 4 shards of 4 MiB decoded, 16 inner chunks each
INDEX_LEN = 16 * 16 + 4  # (offset, length) per inner chunk, then the crc32c
SLOW = 20e6  # bytes per second per response: a shard takes about 100 ms to arrive


def smooth_noise(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = np.linspace(0, 3, SHAPE[0], dtype=np.float32)[:, None, None]
    x = np.linspace(0, 5, SHAPE[2], dtype=np.float32)[None, None, :]
    data = 3000 + 900 * np.sin(z + x) + 40 * rng.standard_normal(SHAPE, dtype=np.float32)
    return data.astype(np.uint16)


def write(root: Path, data: np.ndarray, index_location: str = "end") -> None:
    from zarr.codecs import BytesCodec, ShardingCodec, ZstdCodec

    with quiet_zarr_writes():
        a = zarr.create_array(
            root, shape=SHAPE, chunks=SHARD, dtype="uint16",
            serializer=ShardingCodec(chunk_shape=INNER, codecs=[BytesCodec(), ZstdCodec()],
                                     index_location=index_location),
            compressors=None,
        )  # fmt: skip
        a[:] = data


def shard_file(root: Path, path: str, i: int = 0) -> Path:
    return root / path / "c" / str(i) / "0" / "0"


def exchange_two_inner_chunks(shard: bytes) -> bytes:
    """The same bytes with another index: inner chunks 0 and 1 point at each other's data,
    so the shard (as long) holds those two chunks' values the other way round."""
    data, index = shard[:-INDEX_LEN], shard[-INDEX_LEN:-4]
    entries = [struct.unpack_from("<QQ", index, 16 * k) for k in range(16)]
    entries[0], entries[1] = entries[1], entries[0]
    return data + with_crc32c(b"".join(struct.pack("<QQ", *e) for e in entries))


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Roots with an array "end" (index at the end, the default), each served in turn:
    `root` (also with "start", its index first), `other` (other values, so shards of other
    lengths) and `swapped` (the same bytes but the index: inner chunks 0 and 1 exchanged)."""
    base = tmp_path_factory.mktemp("streamed")
    root, other, swapped = base / "root", base / "other", base / "swapped"
    data = smooth_noise(1)
    write(root / "end", data)
    write(root / "start", data, index_location="start")
    write(other / "end", smooth_noise(2))
    shutil.copytree(root / "end", swapped / "end")
    for i in range(SHARDS):
        f = shard_file(swapped, "end", i)
        f.write_bytes(exchange_two_inner_chunks(f.read_bytes()))
    with quiet_zarr_writes():
        values = zarr.open_array(swapped / "end")[...]
    # Inner chunks 0 and 1 hold [:, :64, :64] and [:, :64, 64:128].
    assert np.array_equal(values[:, 64:], data[:, 64:])
    assert np.array_equal(values[:, :64, :64], data[:, :64, 64:128])
    return root, other, swapped, data


def counting(store: zarrpipe.Store, read) -> tuple[np.ndarray, int]:
    """`read()`'s values, and the GET requests the store made for it."""
    before = store.request_counts()["gets"]
    got = np.asarray(read())
    return got, store.request_counts()["gets"] - before


def read_counting(store: zarrpipe.Store, path: str) -> tuple[np.ndarray, int]:
    arr = store.open_array(path)
    return counting(store, arr.read)


@pytest.mark.timeout(120)
def test_slow_shards_are_decoded_as_they_arrive_with_their_index_alongside(stores):
    root, _, _, data = stores
    with http_server(root) as (url, faults):
        faults.bytes_per_s = SLOW
        store = zarrpipe.Store(url, options={"allow_http": "true"})
        got, gets = read_counting(store, "end")
        np.testing.assert_array_equal(got, data)
        assert gets == 2 * SHARDS, "each shard's body, and its index alongside"
        # An index stored first comes with the body: no second request.
        got, gets = read_counting(store, "start")
        np.testing.assert_array_equal(got, data)
        assert gets == SHARDS
        # Without two request slots per shard, each shard is one request, as before.
        few = zarrpipe.Store(url, options={"allow_http": "true"}, concurrency=SHARDS)
        got, gets = read_counting(few, "end")
        np.testing.assert_array_equal(got, data)
        assert gets == SHARDS


@pytest.mark.timeout(120)
def test_a_selection_of_whole_shards_streams_them(stores):
    root, _, _, data = stores
    with http_server(root) as (url, faults):
        faults.bytes_per_s = SLOW
        store = zarrpipe.Store(url, options={"allow_http": "true"})
        arr = store.open_array("end")
        got, gets = counting(store, lambda: arr[32:96])
        np.testing.assert_array_equal(got, data[32:96])
        assert gets == 2 * 2
        # A part of a shard: its index, then the inner chunks it needs (one run here).
        got, gets = counting(store, lambda: arr[40:50, :64])
        np.testing.assert_array_equal(got, data[40:50, :64])
        assert gets == 2


@pytest.mark.timeout(120)
def test_a_shard_replaced_by_another_length_is_read_from_its_body(stores):
    """The index request sees another version (of another length): the body's own index
    is used, and the values are the body's."""
    root, other, _, data = stores
    with http_server(root) as (url, faults):
        faults.bytes_per_s, faults.ranges_from = SLOW, other
        store = zarrpipe.Store(url, options={"allow_http": "true"})
        got, gets = read_counting(store, "end")
        np.testing.assert_array_equal(got, data)
        assert gets == 2 * SHARDS


@pytest.mark.timeout(120)
def test_a_shard_replaced_between_its_two_requests_fails_the_read(stores):
    """The index request sees another version of the same length: decoding the body by that
    index would put two inner chunks in each other's place, silently, so the read fails,
    naming the shard."""
    root, _, swapped, _ = stores
    with http_server(root) as (url, faults):
        faults.bytes_per_s, faults.ranges_from = SLOW, swapped
        store = zarrpipe.Store(url, options={"allow_http": "true"})
        with pytest.raises(zarrpipe.DecodeError, match=r"c/\d/0/0.*changed while it was read"):
            store.read("end")


@pytest.mark.timeout(120)
def test_a_streamed_shard_cut_short_or_missing(stores, tmp_path):
    root, _, _, data = stores
    shutil.copytree(root / "end", tmp_path / "end")
    shard_file(tmp_path, "end", 3).unlink()  # a missing shard reads as the fill value
    want = data.copy()
    want[96:] = 0
    with http_server(tmp_path) as (url, faults):
        faults.bytes_per_s = SLOW
        store = zarrpipe.Store(url, options={"allow_http": "true"}, retries=0)
        arr = store.open_array("end")
        np.testing.assert_array_equal(np.asarray(arr.read()), want)
        faults.drop_from, faults.drop_next = 1 << 20, 1  # a body stops halfway
        with pytest.raises(OSError):
            arr.read()
        assert faults.drop_next == 0
        np.testing.assert_array_equal(np.asarray(arr.read()), want)
