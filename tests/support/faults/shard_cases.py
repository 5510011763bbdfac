"""Fault cases of shards built by hand: index entries past the end, overlapping, overflowing,
checksums flipped in the index or in one inner chunk."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from .registry import CHECKSUM, DECODE, Built, case
from .stores import (
    DATA,
    DTYPE,
    FILL,
    SHAPE,
    U64_MAX,
    gzip_bomb,
    key_file,
    quiet_zarr,
    stored_key,
    with_crc32c,
)

# shards built by hand

# an 8x8 uint16 array in 4x4 shards of 2x2 inner chunks (bytes + crc32c), index bytes + crc32c
SHARD = (4, 4)
INNER = (2, 2)
SHARD_BAD = (1, 1)  # the broken shard: elements [4:8, 4:8]


def inner_chunk_bytes(shard_index: tuple[int, int], inner: tuple[int, int]) -> bytes:
    r0 = shard_index[0] * SHARD[0] + inner[0] * INNER[0]
    c0 = shard_index[1] * SHARD[1] + inner[1] * INNER[1]
    return with_crc32c(DATA[r0 : r0 + INNER[0], c0 : c0 + INNER[1]].astype("<u2").tobytes())


def shard_bytes(
    entries: list[tuple[int, int]] | None = None,
    data: bytes | None = None,
    *,
    index_crc: bool = True,
    shard_index: tuple[int, int] = SHARD_BAD,
) -> bytes:
    """A shard: the 4 inner chunks of `shard_index` back to back (or `data`), then an index of
    `entries` (default: the right ones) with its crc32c."""
    chunks = [inner_chunk_bytes(shard_index, (i, j)) for i in range(2) for j in range(2)]
    if data is None:
        data = b"".join(chunks)
    if entries is None:
        entries, offset = [], 0
        for c in chunks:
            entries.append((offset, len(c)))
            offset += len(c)
    index = b"".join(struct.pack("<QQ", o, n) for o, n in entries)
    return data + (with_crc32c(index) if index_crc else index)


def write_sharded(
    root: str,
    path: str = "a",
    *,
    index_crc: bool = True,
    inner_codecs: list | None = None,
    index_location: str = "end",
    fallback: bool = False,
) -> Any:
    """The sharded array of the shard cases. `fallback`: an (identity) transpose before the
    sharding codec, a chain zarrpipe hands to zarrs' decoder (same bytes on disk)."""
    import zarr
    from zarr.codecs import BytesCodec, Crc32cCodec, ShardingCodec, TransposeCodec

    with quiet_zarr():
        z = zarr.create_array(
            store=root,
            name=path,
            shape=SHAPE,
            dtype=DTYPE,
            chunks=SHARD,
            serializer=ShardingCodec(
                chunk_shape=INNER,
                codecs=inner_codecs or [BytesCodec(), Crc32cCodec()],
                index_codecs=[BytesCodec(), Crc32cCodec()] if index_crc else [BytesCodec()],
                index_location=index_location,
            ),
            compressors=None,
            filters=[TransposeCodec(order=(0, 1))] if fallback else None,
            fill_value=FILL,
        )
        z[...] = DATA
    return z


def _shard_case(
    name: str,
    what: str,
    expect: Any,
    make: Callable[[], bytes],
    *,
    bad: Any = (slice(4, 8), slice(4, 8)),
    expected: np.ndarray | None = None,
    index_crc: bool = True,
) -> None:
    for fallback in (False, True):

        def build(root: str, fallback: bool = fallback) -> Built:
            z = write_sharded(root, index_crc=index_crc, fallback=fallback)
            key = stored_key("a", z, SHARD_BAD)
            with open(key_file(root, key), "wb") as f:
                f.write(make())
            original = None if expected is not None else DATA[bad]
            return Built(root, "a", bad, key=key, expected=expected, original=original)

        if fallback:
            what_fb = f"{what}; transpose before sharding: zarrs decodes"
            section = "shards decoded by zarrs (fallback path)"
            case(f"fallback-{name}", section, expect, what_fb, tags=("fallback",))(build)
        else:
            case(name, "shards", expect, what)(build)


_N = 12  # bytes per inner chunk: 2x2 uint16 + crc32c
_GOOD = [(0, _N), (_N, _N), (2 * _N, _N), (3 * _N, _N)]


def _entries(k: int, entry: tuple[int, int]) -> list[tuple[int, int]]:
    out = list(_GOOD)
    out[k] = entry
    return out


_shard_case(
    "shard-hand-built-valid",
    "a hand-built valid shard (control: the builder is right)",
    "value",
    shard_bytes,
    expected=DATA[4:8, 4:8],
)
_shard_case(
    "shard-offset-past-end",
    "index entry whose size runs past the end of the shard",
    DECODE,
    lambda: shard_bytes(_entries(3, (3 * _N, 1000))),
)
_shard_case(
    "shard-offset-overflow",
    "index entry whose offset + size overflows 64 bits",
    DECODE,
    lambda: shard_bytes(_entries(1, (U64_MAX - 3, _N))),
)
_shard_case(
    "shard-offset-u64max",
    "index entry with offset = 2^64-1 alone (size valid)",
    DECODE,
    lambda: shard_bytes(_entries(2, (U64_MAX, _N))),
)
_shard_case(
    "shard-size-u64max",
    "index entry with size = 2^64-1 alone (offset valid)",
    DECODE,
    lambda: shard_bytes(_entries(3, (3 * _N, U64_MAX))),
)


def _flip_index_crc() -> bytes:
    b = bytearray(shard_bytes())
    b[-10] ^= 0x01  # inside the index, before its checksum
    return bytes(b)


_shard_case(
    "shard-index-checksum", "index bytes changed under its crc32c", CHECKSUM, _flip_index_crc
)
_shard_case(
    "shard-shorter-than-index",
    "3-byte shard (its index alone is 68 bytes)",
    DECODE,
    lambda: b"\x01\x02\x03",
)
_shard_case(
    "shard-shorter-than-index-partial",
    "3-byte shard, no index checksum, reading one element",
    DECODE,
    lambda: b"\x01\x02\x03",
    bad=(5, 5),
    index_crc=False,
)
_shard_case(
    "shard-empty-entry",
    "inner chunks (0, 1) and (1, 0) marked empty (offset = size = 2^64-1)",
    "value",
    lambda: shard_bytes(
        [_GOOD[0], (U64_MAX, U64_MAX), (U64_MAX, U64_MAX), (_N, _N)],
        inner_chunk_bytes(SHARD_BAD, (0, 0)) + inner_chunk_bytes(SHARD_BAD, (1, 1)),
    ),
    expected=np.where(
        np.add.outer(np.arange(4) // 2, np.arange(4) // 2) == 1, FILL, DATA[4:8, 4:8]
    ).astype(DTYPE),
)


def _flip_inner(k: int) -> Callable[[], bytes]:
    def make() -> bytes:
        b = bytearray(shard_bytes())
        b[k * _N + 1] ^= 0x10
        return bytes(b)

    return make


_shard_case(
    "shard-inner-checksum-one-chunk",
    "inner chunk (0, 1) of the shard fails its crc32c; read exactly that inner chunk",
    CHECKSUM,
    _flip_inner(1),
    bad=(slice(4, 6), slice(6, 8)),
)
_shard_case(
    "shard-inner-checksum-whole",
    "inner chunk (0, 1) of the shard fails its crc32c; read the whole array",
    CHECKSUM,
    _flip_inner(1),
    bad=Ellipsis,
)
_shard_case(
    "shard-inner-truncated",
    "index entry of inner chunk (1, 1) 3 bytes short (checksum no longer at the end)",
    DECODE,
    lambda: shard_bytes(_entries(3, (3 * _N, _N - 3))),
)
_shard_case(
    "shard-empty-file",
    "zero-length shard file",
    DECODE,
    lambda: b"",
)


@case(
    "shard-inner-gzip-bomb",
    "bombs and lying headers",
    DECODE,
    "inner chunk (0, 0) of a shard is a gzip stream inflating to 1 GiB",
    memory=True,
)
def _shard_inner_bomb(root: str) -> Built:
    from zarr.codecs import BytesCodec, GzipCodec

    z = write_sharded(root, inner_codecs=[BytesCodec(), GzipCodec()])
    key = stored_key("a", z, SHARD_BAD)
    parts = [gzip_bomb()] + [
        gzip.compress(inner_chunk_bytes(SHARD_BAD, ix)[:-4]) for ix in ((0, 1), (1, 0), (1, 1))
    ]
    entries, offset = [], 0
    for p in parts:
        entries.append((offset, len(p)))
        offset += len(p)
    with open(key_file(root, key), "wb") as f:
        f.write(shard_bytes(entries, b"".join(parts)))
    return Built(root, "a", (slice(4, 6), slice(4, 6)), key=key + " (inner chunk [0, 0])",
                 original=DATA[4:6, 4:6])  # fmt: skip
