"""The stores the fault cases break: an 8x8 uint16 array written by zarr-python under each
compressor, and the bytes that break it (checksums, garbage, decompression bombs)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import struct
import warnings
import zlib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

# tests/: on the path of the subprocesses that import these helpers.
TESTS_DIR = str(Path(__file__).resolve().parents[2])

MiB = 1 << 20
GiB = 1 << 30
U64_MAX = (1 << 64) - 1

# Every plain case: an 8x8 uint16 array "a" in 4x4 chunks; chunk (1, 1) is the broken one.
SHAPE = (8, 8)
CHUNKS = (4, 4)
DTYPE = np.dtype("<u2")
FILL = 2  # no element of DATA is 2 (DATA % 3 == 1), so fill values are recognisable
DATA = (np.arange(64, dtype=DTYPE) * 3 + 1).reshape(SHAPE)
CHUNK_NBYTES = 4 * 4 * DTYPE.itemsize
BAD = (1, 1)  # the corrupted chunk
BAD_REGION = (slice(4, 8), slice(4, 8))
GOOD_REGION = (slice(0, 4), slice(0, 8))  # chunks (0, 0) and (0, 1), untouched

# Warnings zarr-python emits while writing or reading the (valid) stores we build.
_ZARR_WARNINGS = [
    r".*not in the Zarr version 3 specification",
    r".*Zarr format 2",
    r".*zarr_format=2",
    r".*consolidated",
    r"Combining a `sharding_indexed` codec",
    r"The data type .* does not have a Zarr V3 specification",
]


@contextlib.contextmanager
def quiet_zarr() -> Iterator[None]:
    with warnings.catch_warnings():
        for pattern in _ZARR_WARNINGS:
            warnings.filterwarnings("ignore", message=pattern)
        yield


# ---------------------------------------------------------------------------------------------
# bytes


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as the Zarr v3 crc32c codec computes it."""
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def with_crc32c(data: bytes) -> bytes:
    return data + struct.pack("<I", crc32c(data))


def garbage(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def zstd_frame_claiming(size: int, *, single_segment: bool = False) -> bytes:
    """A valid-looking zstd frame header declaring `size` bytes of content, followed by one
    empty last raw block. 17 bytes with a window descriptor (1 KiB window), 16 without (a
    single-segment frame, whose window is the whole declared size)."""
    magic = struct.pack("<I", 0xFD2FB528)
    if single_segment:
        header = bytes([0xE0])  # 8-byte content size, single segment
    else:
        header = bytes([0xC0, 0x00])  # 8-byte content size; window descriptor: 1 KiB
    return magic + header + struct.pack("<Q", size) + bytes([0x01, 0x00, 0x00])


def _deflate_zeros(n_pieces: int, piece: int, wbits: int) -> tuple[bytes, bytes]:
    """A deflate stream of n_pieces * piece zero bytes, built from one compressed piece
    repeated (a full flush makes every piece compress identically), without materialising
    the output. Returns (stream without trailer, final empty block)."""
    zeros = bytes(piece)
    co = zlib.compressobj(9, zlib.DEFLATED, wbits)
    first = co.compress(zeros) + co.flush(zlib.Z_FULL_FLUSH)
    again = co.compress(zeros) + co.flush(zlib.Z_FULL_FLUSH)
    header_len = len(first) - len(again)
    assert first[header_len:] == again, "full-flushed pieces should be identical"
    return first + again * (n_pieces - 1), b"\x03\x00"  # final fixed block, no symbols


@cache
def zlib_bomb(total: int = GiB, piece: int = 16 * MiB) -> bytes:
    """A ~1 MB zlib stream that inflates to `total` zero bytes."""
    body, final = _deflate_zeros(total // piece, piece, 15)
    adler = 1
    zeros = bytes(piece)
    for _ in range(total // piece):
        adler = zlib.adler32(zeros, adler)
    return body + final + struct.pack(">I", adler)


@cache
def gzip_bomb(total: int = GiB, piece: int = 16 * MiB) -> bytes:
    """A ~1 MB gzip member that inflates to `total` zero bytes."""
    body, final = _deflate_zeros(total // piece, piece, -15)
    crc = 0
    zeros = bytes(piece)
    for _ in range(total // piece):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + body + final + struct.pack("<II", crc, total & 0xFFFFFFFF)


@cache
def zstd_bomb(total: int = GiB) -> bytes:
    """A real zstd frame (content size in its header) of `total` zero bytes."""
    import numcodecs

    return bytes(numcodecs.Zstd(level=3).encode(np.zeros(total, dtype=np.uint8)))


def blosc_claiming(frame: bytes, nbytes: int) -> bytes:
    """A blosc frame whose header claims `nbytes` of uncompressed data."""
    out = bytearray(frame)
    out[4:8] = struct.pack("<I", nbytes)
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# plain (unsharded) arrays by compressor

COMPRESSORS = ["zstd", "blosc", "gzip", "zlib-v2", "blosc-v2", "none", "crc32c"]
# Codecs zarrpipe reads through its codec plugins (codecs/src/codec/plugins/), on the zarrs path.
PLUGIN_CODECS = ["lz4", "lz4-v2", "bz2", "pcodec", "delta-v2", "adler32", "fletcher32"]
# Kinds whose stored bytes are the raw elements: random bytes of a chunk's length are valid.
RAW_KINDS = ("none", "delta-v2")


def create_kwargs(kind: str) -> dict[str, Any]:
    import numcodecs
    from zarr.codecs import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec

    return {
        "zstd": {"compressors": [ZstdCodec()]},
        "blosc": {"compressors": [BloscCodec(cname="lz4", clevel=5)]},
        "gzip": {"compressors": [GzipCodec()]},
        "zlib-v2": {"zarr_format": 2, "compressors": numcodecs.Zlib(level=5)},
        "blosc-v2": {"zarr_format": 2, "compressors": numcodecs.Blosc(cname="zstd")},
        "none": {"compressors": None},
        "crc32c": {"compressors": [Crc32cCodec()]},
        **_plugin_kwargs(),
    }[kind]


def _plugin_kwargs() -> dict[str, dict[str, Any]]:
    import numcodecs
    from zarr.codecs import numcodecs as znc

    with quiet_zarr():
        return {
            "lz4": {"compressors": [znc.LZ4()]},
            "lz4-v2": {"zarr_format": 2, "compressors": numcodecs.LZ4()},
            "bz2": {"compressors": [znc.BZ2()]},
            "pcodec": {"serializer": znc.PCodec(), "compressors": None},
            "delta-v2": {
                "zarr_format": 2,
                "filters": [numcodecs.Delta(dtype="<u2")],
                "compressors": None,
            },
            "adler32": {"compressors": [znc.Adler32()]},
            "fletcher32": {"compressors": [znc.Fletcher32()]},
        }


def encode(kind: str, raw: bytes) -> bytes:
    """A valid encoded chunk of `raw` bytes for a compressor kind (any size: that is the
    point; the chunk it is stored as may expect another)."""
    import numcodecs

    arr = np.frombuffer(raw, dtype=np.uint8) if len(raw) % 2 else np.frombuffer(raw, DTYPE)
    if kind == "zstd":
        return bytes(numcodecs.Zstd().encode(arr))
    if kind in ("blosc", "blosc-v2"):
        return bytes(numcodecs.Blosc(cname="lz4").encode(arr))
    if kind == "gzip":
        return gzip.compress(raw)
    if kind == "zlib-v2":
        return zlib.compress(raw)
    if kind == "none":
        return raw
    if kind == "crc32c":
        return with_crc32c(raw)
    plugin = {
        "lz4": numcodecs.LZ4(),
        "lz4-v2": numcodecs.LZ4(),
        "bz2": numcodecs.BZ2(),
        "pcodec": numcodecs.PCodec(),
        "adler32": numcodecs.Adler32(),
        "fletcher32": numcodecs.Fletcher32(),
    }
    if kind in plugin:
        return bytes(plugin[kind].encode(arr))
    if kind == "delta-v2":
        return bytes(numcodecs.Delta(dtype="<u2").encode(arr)) if len(raw) % 2 == 0 else raw
    raise ValueError(kind)


def write_plain(root: str, kind: str, path: str = "a", data: np.ndarray = DATA, **kwargs: Any):
    """Writes `data` as an array at `path` with zarr-python; returns the zarr.Array."""
    import zarr

    kw = create_kwargs(kind) | kwargs
    with quiet_zarr():
        z = zarr.create_array(
            store=root,
            name=path or None,
            shape=data.shape,
            chunks=kw.pop("chunks", CHUNKS),
            dtype=data.dtype,
            fill_value=kw.pop("fill_value", FILL),
            **kw,
        )
        z[...] = data
    return z


def stored_key(path: str, z: Any, index: tuple[int, ...]) -> str:
    """The store key of a chunk by zarr-python's own encoding ("a/c/1/1", "a/1.1")."""
    return "/".join(p for p in (path, z.metadata.encode_chunk_key(tuple(index))) if p)


def key_file(root: str, key: str) -> str:
    return os.path.join(root, *key.split("/"))


# ---------------------------------------------------------------------------------------------
# metadata written by hand

ZSTD_V3 = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
BYTES_V3 = {"name": "bytes", "configuration": {"endian": "little"}}


def v3_metadata(shape, chunks, dtype="uint16", codecs=None, fill_value=0) -> dict:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": [BYTES_V3, *(codecs or [])],
        "attributes": {},
    }


def write_json(file: str, obj: Any) -> None:
    os.makedirs(os.path.dirname(file), exist_ok=True)
    with open(file, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
