"""Shards read in part through `zarrpipe.CodecPipeline` on stores zarrpipe does not reach
itself (zarr-python's memory store, fsspec's remote filesystems): a read that needs only some
inner chunks of a shard fetches the shard's index, then the byte ranges of those inner
chunks, as zarr-python's own sharding codec does, never the whole shard. Values are compared
with zarr-python's own pipeline; a bad index or a shard shorter than its index is an error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest
import zarr
import zarrpipe
from packaging.version import Version
from zarr.abc.store import RangeByteRequest, SuffixByteRequest
from zarr.codecs import BytesCodec, Crc32cCodec, ShardingCodec, ZstdCodec
from zarr.core.buffer.cpu import Buffer
from zarr.core.sync import sync
from zarr.storage import MemoryStore, WrapperStore

OURS = {"codec_pipeline.path": "zarrpipe.CodecPipeline", "codec_pipeline.strict": True}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}

SHAPE, SHARD, INNER = (96, 80), (32, 40), (8, 10)
# Every inner chunk of a shard, as a read of one inner chunk's worth.
N_INNER = (SHARD[0] // INNER[0]) * (SHARD[1] // INNER[1])


class Recording(WrapperStore):  # type: ignore[type-arg]
    """A store that records every chunk `get` (key, byte range, bytes returned) in `log`
    (zarr-python may re-wrap a store, so the log is shared by class)."""

    log: ClassVar[list[tuple[str, Any, int | None]]] = []

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        buf = await self._store.get(key, prototype, byte_range)
        if not key.rsplit("/", 1)[-1].startswith((".z", "zarr.json")):
            type(self).log.append((key, byte_range, None if buf is None else len(buf)))
        return buf


@pytest.fixture
def log() -> Iterator[list[tuple[str, Any, int | None]]]:
    Recording.log = []
    yield Recording.log


def sharding(index_location: str, crc: bool = True) -> ShardingCodec:
    return ShardingCodec(
        chunk_shape=INNER,
        codecs=[BytesCodec(), ZstdCodec(level=1)],
        index_codecs=[BytesCodec(), Crc32cCodec()] if crc else [BytesCodec()],
        index_location=index_location,
    )


def written(index_location: str = "end", crc: bool = True) -> tuple[MemoryStore, np.ndarray]:
    """An int32 array zarr-python wrote with its own pipeline: noise (so inner chunks differ
    in size), one inner chunk left at the fill value (not stored), one shard never written."""
    rng = np.random.default_rng(7)
    data = rng.integers(0, 1000, SHAPE, dtype="int32")
    data[8:16, 10:20] = 0  # an inner chunk of fill values: not stored
    data[64:96, 40:80] = 0  # a whole shard of them: no shard stored
    store = MemoryStore()
    with zarr.config.set(DEFAULT):
        arr = zarr.create_array(
            store,
            shape=SHAPE,
            chunks=SHARD,
            dtype="int32",
            fill_value=0,
            serializer=sharding(index_location, crc),
            compressors=None,
        )
        arr[...] = data
    return store, data


def ours(store: MemoryStore) -> Any:
    with zarr.config.set(OURS):
        return zarr.open_array(Recording(store), mode="r")


def shard_bytes(store: MemoryStore, key: str) -> bytes:
    return zarr.core.sync.sync(
        store.get(key, zarr.core.buffer.default_buffer_prototype())
    ).to_bytes()


SELECTIONS = [
    (slice(0, 8), slice(0, 10)),  # one inner chunk
    (slice(3, 10), slice(5, 27)),  # parts of six
    (5, slice(None)),  # a row across shards
    (slice(None), 33),  # a column across shards
    (slice(8, 16), slice(10, 20)),  # the inner chunk that is not stored
    (slice(60, 70), slice(35, 45)),  # into the shard that is not stored
    (slice(0, 32), slice(0, 40)),  # a whole shard
    (slice(None), slice(None)),  # everything
    (slice(90, 96), slice(70, 80)),  # the last corner
]


@pytest.mark.parametrize("index_location", ["end", "start"])
@pytest.mark.parametrize("sel", SELECTIONS, ids=range(len(SELECTIONS)))
def test_values_equal_zarr_pythons(index_location, sel, log):
    store, data = written(index_location)
    got = ours(store)[sel]
    np.testing.assert_array_equal(got, data[sel])
    with zarr.config.set(DEFAULT):
        np.testing.assert_array_equal(zarr.open_array(store, mode="r")[sel], got)


PICKS = [
    ("oindex", ([1, 5, 3], slice(0, 10))),  # integer array inside one inner chunk
    ("oindex", ([0, 40, 95], [3, 79])),  # integer arrays across shards
    ("vindex", ([2, 50, 70, 95], [7, 44, 12, 79])),  # points, one in the shard not stored
    ("mask", None),  # a boolean mask
    ("step", (slice(1, 30, 7), slice(2, 18, 9))),  # steps inside half of one shard
]


@pytest.mark.parametrize("index_location", ["end", "start"])
@pytest.mark.parametrize(("kind", "sel"), PICKS, ids=[k for k, _ in PICKS])
def test_picks_equal_zarr_pythons(index_location, kind, sel, log):
    store, data = written(index_location)
    if kind == "mask":
        sel = np.zeros(SHAPE, dtype=bool)
        sel[[3, 9, 70], [4, 33, 61]] = True

    def read(arr: Any) -> Any:
        if kind == "oindex":
            return arr.oindex[sel]
        if kind in ("vindex", "mask"):
            return arr.vindex[sel]
        return arr[sel]

    got = read(ours(store))
    with zarr.config.set(DEFAULT):
        want = read(zarr.open_array(store, mode="r"))
    np.testing.assert_array_equal(got, want)
    if kind == "vindex":
        np.testing.assert_array_equal(got, data[tuple(np.asarray(s) for s in sel)])
    elif kind == "step":
        np.testing.assert_array_equal(got, data[sel])
    # Every shard a pick reads in part is fetched by ranges, never whole.
    assert not [k for k, r, got_n in log if r is None and got_n is not None and k == "c/0/0"]


def test_a_pick_inside_one_inner_chunk_fetches_the_index_and_that_chunk(log):
    store, data = written()
    got = ours(store).oindex[[1, 5, 3], 0:10]
    np.testing.assert_array_equal(got, data[[1, 5, 3], 0:10])
    whole = len(shard_bytes(store, "c/0/0"))
    assert [(k, type(r).__name__) for k, r, _ in log] == [
        ("c/0/0", "SuffixByteRequest"),
        ("c/0/0", "RangeByteRequest"),
    ], log
    assert log[1][2] is not None and log[1][2] < whole // 8


@pytest.mark.parametrize("index_location", ["end", "start"])
def test_one_inner_chunk_fetches_the_index_and_that_chunk(index_location, log):
    store, data = written(index_location)
    arr = ours(store)
    np.testing.assert_array_equal(arr[0:8, 0:10], data[0:8, 0:10])
    index_len = 16 * N_INNER + 4
    whole = len(shard_bytes(store, "c/0/0"))
    assert [k for k, *_ in log] == ["c/0/0", "c/0/0"], log
    (_, index_range, index_got), (_, chunk_range, chunk_got) = log
    if index_location == "end":
        assert index_range == SuffixByteRequest(index_len)
    else:
        assert index_range == RangeByteRequest(0, index_len)
    assert index_got == index_len
    assert isinstance(chunk_range, RangeByteRequest)
    # One inner chunk of the 16: far less than the shard.
    assert chunk_got is not None and chunk_got < whole // 8


def test_whole_shards_are_one_request_each(log):
    store, data = written()
    np.testing.assert_array_equal(ours(store)[0:32, 0:80], data[0:32, 0:80])
    assert sorted(log) == sorted(
        (key, None, len(shard_bytes(store, key))) for key in ("c/0/0", "c/0/1")
    )


def test_a_shard_that_is_not_stored_costs_one_request(log):
    store, data = written()
    np.testing.assert_array_equal(ours(store)[64:72, 40:50], data[64:72, 40:50])
    assert [(k, got) for k, _, got in log] == [("c/2/1", None)]


def test_nearby_inner_chunks_share_a_request(log):
    store, data = written()
    # Four inner chunks side by side in one row of a shard: stored one after another in
    # zarr-python's order only in part, but all within the merge gap.
    np.testing.assert_array_equal(ours(store)[0:8, 0:40], data[0:8, 0:40])
    ranges = [r for k, r, _ in log if isinstance(r, RangeByteRequest)]
    assert len(ranges) == 1, log


def test_a_corrupt_index_is_an_error(log):
    store, _ = written()
    shard = bytearray(shard_bytes(store, "c/0/0"))
    shard[-10] ^= 0xFF  # inside the index: its checksum no longer matches
    sync(store.set("c/0/0", Buffer.from_bytes(bytes(shard))))
    with pytest.raises(zarrpipe.ZarrpipeError, match=r"crc32c|checksum"):
        ours(store)[0:8, 0:10]


def test_an_index_past_the_shards_end_is_an_error(log):
    store, _ = written("end", crc=False)
    shard = shard_bytes(store, "c/0/0")
    index_len = 16 * N_INNER
    index = np.frombuffer(shard[-index_len:], dtype="<u8").copy().reshape(-1, 2)
    index[0, 0] = len(shard) + 1000  # inner chunk (0, 0) "stored" past the end
    bad = shard[:-index_len] + index.tobytes()
    sync(store.set("c/0/0", Buffer.from_bytes(bad)))
    with pytest.raises(zarrpipe.ZarrpipeError, match=r"not fetched|shorter"):
        ours(store)[0:8, 0:10]


def test_a_shard_shorter_than_its_index_is_an_error(log):
    store, _ = written()
    sync(store.set("c/0/0", Buffer.from_bytes(b"\x00" * 40)))
    with pytest.raises(zarrpipe.ZarrpipeError, match=r"shard index|shorter"):
        ours(store)[0:8, 0:10]


@pytest.mark.skipif(
    Version(zarr.__version__) < Version("3.2"),
    reason="rectilinear chunk grids need zarr-python 3.2 or later",
)
def test_shards_of_different_sizes_are_read_in_part(log):
    store = MemoryStore()
    data = np.random.default_rng(3).integers(0, 99, (60, 40), dtype="int16")
    with zarr.config.set({"array.rectilinear_chunks": True}):
        with zarr.config.set(DEFAULT):
            arr = zarr.create_array(
                store, shape=(60, 40), chunks=(10, 10), shards=[[20, 40], 40], dtype="int16"
            )
            arr[...] = data
        got = ours(store)[25:35, 12:18]
    np.testing.assert_array_equal(got, data[25:35, 12:18])
    # The second shard (40 rows): its index, then the inner chunks of rows 20-40, cols 10-20.
    assert [(k, type(r).__name__) for k, r, _ in log] == [
        ("c/1/0", "SuffixByteRequest"),
        ("c/1/0", "RangeByteRequest"),
    ], log


def test_an_empty_inner_chunk_entry_is_a_decode_error(log):
    store, _ = written("end", crc=False)
    shard = shard_bytes(store, "c/0/0")
    index_len = 16 * N_INNER
    index = np.frombuffer(shard[-index_len:], dtype="<u8").copy().reshape(-1, 2)
    index[0, 1] = 0  # inner chunk (0, 0): zero bytes long
    bad = shard[:-index_len] + index.tobytes()
    sync(store.set("c/0/0", Buffer.from_bytes(bad)))
    with pytest.raises(zarrpipe.DecodeError, match=r"c/0/0"):
        ours(store)[0:8, 0:10]
