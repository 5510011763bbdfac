"""Corrupt shards read through zarrpipe's Python API (issue 6): shard indexes built by hand
(offsets past the end, offset + size overflowing 64 bits, 2^64-1 alone, a corrupt index
checksum, shards shorter than their index), empty entries (the fill value), and checksums of
single inner chunks: exactly the inner chunk that fails is an error naming
"<shard key> (inner chunk [i, j])", and its neighbours still read.

The array of every case: 8x8 uint16 in 4x4 shards of 2x2 inner chunks (bytes + crc32c inner
codecs, bytes + crc32c index); shard (1, 1), elements [4:8, 4:8], is the broken one.
"""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
import zarr
import zarrpipe
from support.faults.checks import assert_healthy, assert_raises
from support.faults.registry import CASES, allowed_exceptions
from support.faults.shard_cases import SHARD_BAD, shard_bytes, write_sharded
from support.faults.stores import (
    DATA,
    DTYPE,
    FILL,
    U64_MAX,
    crc32c,
    key_file,
    quiet_zarr,
    stored_key,
    with_crc32c,
)

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")

SHARD_CASES = [n for n, c in CASES.items() if c.section == "shards"]  # (zarrs fallback
# variants of the same shards run in test_faults.py::test_fallback_fault)
# global inner-chunk index of each shard-(1, 1) index entry (C order inside the shard)
ENTRY = {k: (2 + k // 2, 2 + k % 2) for k in range(4)}
# which entry each case breaks (cases that break the whole index use entry 0)
BROKEN_ENTRY = {
    "shard-offset-past-end": 3,
    "shard-offset-overflow": 1,
    "shard-offset-u64max": 2,
    "shard-size-u64max": 3,
    "shard-inner-truncated": 3,
    "shard-inner-checksum-one-chunk": 1,
    "shard-inner-checksum-whole": 1,
}
OTHER_SHARDS = [(slice(0, 4), slice(0, 8)), (slice(4, 8), slice(0, 4))]


def region(index):
    i, j = index
    return slice(2 * i, 2 * i + 2), slice(2 * j, 2 * j + 2)


def assert_other_shards_read(arr):
    for sel in OTHER_SHARDS:
        np.testing.assert_array_equal(np.asarray(arr[sel]), DATA[sel])


@pytest.mark.parametrize("name", SHARD_CASES)
def test_shard_fault(tmp_path, name):
    c = CASES[name]
    b = c.build(str(tmp_path / "store"))
    store = zarrpipe.Store(b.root)
    arr = store.open_array(b.path)
    assert arr.shards == (4, 4) and arr.chunks == (2, 2)
    first_inner = (2 * SHARD_BAD[0], 2 * SHARD_BAD[1])
    assert arr.chunk_key(first_inner) == b.key, "chunk_key names the shard holding a chunk"
    if c.expect == "value":
        np.testing.assert_array_equal(np.asarray(arr[b.bad]), b.expected)
        np.testing.assert_array_equal(np.asarray(store.read(b.path, b.bad)), b.expected)
        for k, index in ENTRY.items():
            want = b.expected[region((index[0] - 2, index[1] - 2))]
            np.testing.assert_array_equal(np.asarray(arr.read_chunk(index)), want, str(k))
        tensors = arr.read_chunks(list(ENTRY.values()))
        for t, index in zip(tensors, ENTRY.values(), strict=True):
            np.testing.assert_array_equal(
                np.asarray(t), b.expected[region((index[0] - 2, index[1] - 2))]
            )
    else:
        types = allowed_exceptions(c)
        bad_inner = ENTRY[BROKEN_ENTRY.get(name, 0)]
        r0, c0 = region(bad_inner)[0].start, region(bad_inner)[1].start
        reads = {
            "the case's selection": lambda: arr[b.bad],
            "store.read": lambda: store.read(b.path, b.bad),
            "the whole array": lambda: arr[...],
            "one element of the broken inner chunk": lambda: arr[r0 + 1, c0],
            "read_chunk of the broken inner chunk": lambda: arr.read_chunk(bad_inner),
            "read_chunks with it": lambda: arr.read_chunks([(0, 0), bad_inner]),
        }
        for what, read in reads.items():
            assert_raises(read, types, key=b.key, what=what)
    assert_other_shards_read(arr)
    assert_healthy(str(tmp_path / "scratch"))


# ---------------------------------------------------------------------------------------------
# checksums of single inner chunks


@pytest.fixture
def one_bad_inner_chunk(tmp_path):
    """Shard (1, 1) with inner chunk (0, 1) (global chunk (2, 3)) failing its crc32c."""
    b = CASES["shard-inner-checksum-one-chunk"].build(str(tmp_path / "store"))
    return b


@pytest.mark.parametrize("cache_bytes", [0, 1 << 20])
def test_exactly_one_inner_chunk_fails_its_checksum(one_bad_inner_chunk, cache_bytes):
    b = one_bad_inner_chunk
    store = zarrpipe.Store(b.root, cache_bytes=cache_bytes)
    arr = store.open_array(b.path)
    inner_key = f"{b.key} (inner chunk [0, 1])"
    for _ in range(2):  # a second time: not cached as anything
        for what, read in {
            "read_chunk": lambda: arr.read_chunk((2, 3)),
            "read_chunks": lambda: arr.read_chunks([(2, 2), (2, 3)]),
            "its region": lambda: arr[4:6, 6:8],
            "one element": lambda: arr[5, 7],
            "part of a row": lambda: arr[4, 5:7],
            "the shard": lambda: arr[4:8, 4:8],
        }.items():
            e = assert_raises(read, zarrpipe.ChecksumError, key=inner_key, what=what)
            assert "inner chunk [0, 0]" not in str(e) and "inner chunk [1, 1]" not in str(e)
        # the other inner chunks of the same shard still read
        for index in [(2, 2), (3, 2), (3, 3)]:
            np.testing.assert_array_equal(np.asarray(arr.read_chunk(index)), DATA[region(index)])
        tensors = arr.read_chunks([(2, 2), (3, 2), (3, 3)])
        for t, index in zip(tensors, [(2, 2), (3, 2), (3, 3)], strict=True):
            np.testing.assert_array_equal(np.asarray(t), DATA[region(index)])
        np.testing.assert_array_equal(np.asarray(arr[4:6, 4:6]), DATA[4:6, 4:6])
        np.testing.assert_array_equal(np.asarray(arr[6:8, 4:8]), DATA[6:8, 4:8])
        np.testing.assert_array_equal(np.asarray(arr[:, 0:6]), DATA[:, 0:6])
        assert_other_shards_read(arr)


def test_one_inner_chunk_through_codec_pipeline(one_bad_inner_chunk):
    b = one_bad_inner_chunk
    with zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"}), quiet_zarr():
        z = zarr.open_array(store=b.root, path=b.path, mode="r")
        assert isinstance(z._async_array.codec_pipeline, zarrpipe.CodecPipeline)
        assert_raises(lambda: z[4:6, 6:8], zarrpipe.ChecksumError, key=b.key)
        np.testing.assert_array_equal(z[6:8, 4:8], DATA[6:8, 4:8])
        np.testing.assert_array_equal(z[4:6, 4:6], DATA[4:6, 4:6])


def _read(file: str) -> bytes:
    with open(file, "rb") as f:
        return f.read()


def _parse_index(shard: bytes, n: int, at_end: bool) -> list[tuple[int, int]]:
    raw = shard[-(16 * n + 4) :] if at_end else shard[: 16 * n + 4]
    payload = raw[:-4]
    assert struct.unpack("<I", raw[-4:])[0] == crc32c(payload), "zarr-python's index crc"
    return [struct.unpack("<QQ", payload[16 * k : 16 * k + 16]) for k in range(n)]


def _replace_index(shard: bytes, entries, at_end: bool) -> bytes:
    index = with_crc32c(b"".join(struct.pack("<QQ", o, s) for o, s in entries))
    return shard[: -len(index)] + index if at_end else index + shard[len(index) :]


@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("inner", ["crc32c", "zstd+crc32c"])
def test_zarr_python_written_shard_with_one_bad_inner_chunk(tmp_path, location, inner):
    """A shard zarr-python wrote (index at the end or the start, compressed inner chunks):
    flip a byte of one inner chunk; exactly that inner chunk fails its checksum."""
    from zarr.codecs import BytesCodec, Crc32cCodec, ZstdCodec

    codecs = [BytesCodec(), Crc32cCodec()]
    if inner == "zstd+crc32c":
        codecs = [BytesCodec(), ZstdCodec(), Crc32cCodec()]
    root = str(tmp_path)
    z = write_sharded(root, inner_codecs=codecs, index_location=location)
    key = stored_key("a", z, SHARD_BAD)
    file = key_file(root, key)
    shard = bytearray(_read(file))
    entries = _parse_index(bytes(shard), 4, location == "end")
    offset, size = entries[2]  # inner chunk (1, 0): global (3, 2)
    shard[offset + size // 2] ^= 0x04
    with open(file, "wb") as f:
        f.write(bytes(shard))
    arr = zarrpipe.Store(root).open_array("a")
    assert_raises(
        lambda: arr.read_chunk((3, 2)), zarrpipe.ChecksumError, key=f"{key} (inner chunk [1, 0])"
    )
    assert_raises(lambda: arr[7, 4], zarrpipe.ChecksumError, key=key)
    for index in [(2, 2), (2, 3), (3, 3)]:
        np.testing.assert_array_equal(np.asarray(arr.read_chunk(index)), DATA[region(index)])
    np.testing.assert_array_equal(np.asarray(arr[4:6, :]), DATA[4:6, :])
    assert_other_shards_read(arr)


@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize(
    "entry", [(10_000, 8), (U64_MAX - 3, 8), (U64_MAX, 8), (0, U64_MAX), (U64_MAX, 0)]
)
def test_zarr_python_written_shard_with_a_bad_index_entry(tmp_path, location, entry):
    """Index entries rewritten (with a valid index checksum) to point outside the shard."""
    root = str(tmp_path)
    z = write_sharded(root, index_location=location)
    key = stored_key("a", z, SHARD_BAD)
    file = key_file(root, key)
    shard = _read(file)
    entries = _parse_index(shard, 4, location == "end")
    entries[3] = entry  # inner chunk (1, 1): global (3, 3)
    with open(file, "wb") as f:
        f.write(_replace_index(shard, entries, location == "end"))
    arr = zarrpipe.Store(root).open_array("a")
    assert_raises(lambda: arr.read_chunk((3, 3)), zarrpipe.DecodeError, key=key)
    assert_raises(lambda: arr[6:8, 6:8], zarrpipe.DecodeError, key=key)
    assert_raises(lambda: arr[...], zarrpipe.DecodeError, key=key)
    assert_other_shards_read(arr)


def test_all_entries_empty_and_missing_shard_read_fill(tmp_path):
    """A shard whose every entry is empty, and a shard file that does not exist, both read
    as the fill value (the format says so), through read, read_chunk and a cache."""
    root = str(tmp_path)
    z = write_sharded(root)
    with open(key_file(root, stored_key("a", z, (1, 1))), "wb") as f:
        f.write(shard_bytes([(U64_MAX, U64_MAX)] * 4, b""))
    os.remove(key_file(root, stored_key("a", z, (0, 1))))
    expected = DATA.copy()
    expected[4:8, 4:8] = FILL
    expected[0:4, 4:8] = FILL
    for cache in (0, 1 << 20):
        arr = zarrpipe.Store(root, cache_bytes=cache).open_array("a")
        for _ in range(2):
            np.testing.assert_array_equal(np.asarray(arr[...]), expected)
            np.testing.assert_array_equal(
                np.asarray(arr.read_chunk((3, 3))), np.full((2, 2), FILL, DTYPE)
            )
            np.testing.assert_array_equal(np.asarray(arr[5, 1:7]), expected[5, 1:7])
    with quiet_zarr():
        np.testing.assert_array_equal(
            zarr.open_array(store=root, path="a", mode="r")[...], expected
        )


def test_shard_with_trailing_garbage_and_gaps_reads(tmp_path):
    """Bytes the index does not point at (gaps, a prefix) are allowed by the format: the
    shard still reads correctly."""
    root = str(tmp_path)
    z = write_sharded(root)
    key = stored_key("a", z, SHARD_BAD)
    chunks = [shard_bytes()[12 * k : 12 * k + 12] for k in range(4)]
    data = b"JUNK" + chunks[0] + b"gap" + chunks[1] + chunks[2] + b"\x00" * 7 + chunks[3]
    offsets = [4, 4 + 12 + 3, 4 + 24 + 3, 4 + 36 + 3 + 7]
    with open(key_file(root, key), "wb") as f:
        f.write(shard_bytes([(o, 12) for o in offsets], data))
    arr = zarrpipe.Store(root).open_array("a")
    np.testing.assert_array_equal(np.asarray(arr[...]), DATA)
    with quiet_zarr():
        np.testing.assert_array_equal(zarr.open_array(store=root, path="a", mode="r")[...], DATA)
