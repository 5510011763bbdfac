"""Hostile and corrupt Zarr stores for the reliability tests, and the zarr-python comparison.

Every builder writes a valid store with zarr-python (or writes metadata by hand), then breaks
it on disk, and returns a `Built`: which array to open, what to read, which stored key a
corrupt-chunk error must name, a selection that must still read correctly afterwards, and what
a correct reader returns where the format defines an answer (e.g. the fill value for an empty
shard index entry).

`observe(case, reader)` runs one case in a fresh subprocess (with a timeout, so a crash or a
hang in the reader cannot take the caller down) and reports what happened: the exception, or
the data and whether it is right, the peak-RSS growth of the read, and whether a valid read
still works afterwards in the same process.

`python tests/fault_stores.py` runs every case against zarrpipe and against zarr-python's
default pipeline and prints the table of docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

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
# cases


@dataclass
class Built:
    """A broken store, and what a reader should make of it."""

    root: str
    path: str  # the array's path in the store
    bad: Any  # the selection that touches the broken part
    key: str | None = None  # the stored key a corrupt-chunk error must name
    good: Any = GOOD_REGION  # a selection that must still read correctly
    good_value: np.ndarray | None = None  # what `good` reads as (default: DATA[good])
    expected: np.ndarray | None = None  # the correct result of reading `bad`, if any
    original: np.ndarray | None = None  # the data before the damage (to spot silent errors)
    store_path: str | None = None  # for cases on the store itself (default: root)

    def __post_init__(self) -> None:
        if self.good is not None and self.good_value is None:
            self.good_value = DATA[self.good]


@dataclass
class Case:
    name: str
    section: str
    build: Callable[[str], Built]
    # zarrpipe's contract: an exception class (the read raises an instance of it), "value"
    # (the read returns Built.expected), or a tuple of such alternatives
    expect: Any
    what: str
    # where the exception is raised: "read" (the default), "open" (Store / open_array)
    stage: str = "read"
    memory: bool = False  # measure peak RSS growth (a decompression bomb / absurd header)
    tags: tuple[str, ...] = field(default_factory=tuple)


CASES: dict[str, Case] = {}


def case(name: str, section: str, expect: Any, what: str, **kw: Any):
    def register(fn: Callable[[str], Built]) -> Callable[[str], Built]:
        assert name not in CASES, name
        CASES[name] = Case(name, section, fn, expect, what, **kw)
        return fn

    return register


def _error(name: str) -> type:
    """A zarrpipe exception class by name, resolved lazily (the extension may be rebuilding)."""
    import zarrpipe

    return getattr(zarrpipe, name)


class Lazy:
    """An exception class named now, imported when first compared."""

    def __init__(self, name: str) -> None:
        self.name = name

    def resolve(self) -> type:
        return _error(self.name)

    def __repr__(self) -> str:
        return self.name


def allowed_outcomes(c: Case) -> tuple[Any, ...]:
    """The case's allowed outcomes: exception classes (resolved) and/or "value"."""
    alts = c.expect if isinstance(c.expect, tuple) else (c.expect,)
    return tuple(a.resolve() if isinstance(a, Lazy) else a for a in alts)


def allowed_exceptions(c: Case) -> tuple[type, ...]:
    return tuple(a for a in allowed_outcomes(c) if isinstance(a, type))


DECODE = Lazy("DecodeError")
CHECKSUM = Lazy("ChecksumError")
METADATA = Lazy("MetadataError")
UNSUPPORTED = Lazy("UnsupportedError")


def _corrupt_plain(kind: str, damage: Callable[[bytes], bytes]) -> Callable[[str], Built]:
    def build(root: str) -> Built:
        z = write_plain(root, kind)
        key = stored_key("a", z, BAD)
        file = key_file(root, key)
        with open(file, "rb") as f:
            good = f.read()
        with open(file, "wb") as f:
            f.write(damage(good))
        return Built(root, "a", BAD_REGION, key=key, original=DATA[BAD_REGION])

    return build


def _register_chunk_cases() -> None:
    for kind in COMPRESSORS + PLUGIN_CODECS:
        damages: dict[str, tuple[Callable[[bytes], bytes], Any, str]] = {
            "truncated": (lambda b: b[: len(b) // 2], DECODE, "first half of the chunk file"),
            "empty": (lambda b: b"", DECODE, "zero-length chunk file"),
            "garbage": (
                # raw chunks of the right length are valid whatever they hold: change it
                (lambda b: garbage(len(b) + 3)) if kind in RAW_KINDS else lambda b: garbage(len(b)),
                CHECKSUM if kind == "crc32c" else DECODE,
                "random bytes" + (" (3 more than a chunk)" if kind in RAW_KINDS else ""),
            ),
            "short-frame": (
                lambda b, k=kind: encode(k, DATA[BAD_REGION].tobytes()[:-2]),
                DECODE,
                "valid frame of one element too few",
            ),
            "long-frame": (
                lambda b, k=kind: encode(k, DATA[BAD_REGION].tobytes() + b"\x07\x00"),
                DECODE,
                "valid frame of one element too many",
            ),
        }
        if kind == "crc32c":
            damages["bitflip"] = (
                lambda b: b[:5] + bytes([b[5] ^ 0x10]) + b[6:],
                CHECKSUM,
                "one bit flipped in the data",
            )
            damages["bitflip-crc"] = (
                lambda b: b[:-1] + bytes([b[-1] ^ 0x01]),
                CHECKSUM,
                "one bit flipped in the stored checksum",
            )
        if kind == "delta-v2":
            # Raw elements under a filter: bytes of the chunk's length are a valid chunk, and
            # zarrs reads a part of a raw chunk by byte range, never seeing a longer file.
            del damages["garbage"], damages["long-frame"]
        if kind in ("adler32", "fletcher32"):
            damages["bitflip"] = (
                lambda b: b[:5] + bytes([b[5] ^ 0x10]) + b[6:],
                DECODE,
                "one bit flipped in the data",
            )
        for dname, (fn, expect, what) in damages.items():
            case(f"{kind}-{dname}", "chunk bytes", expect, f"{kind}: {what}")(
                _corrupt_plain(kind, fn)
            )


_register_chunk_cases()


# --- frames whose headers lie about their size, decompression bombs


def _bomb_case(name: str, kind: str, payload: Callable[[], bytes], what: str) -> None:
    case(name, "bombs and lying headers", DECODE, what, memory=True)(
        _corrupt_plain(kind, lambda b: payload())
    )


_bomb_case(
    "zstd-1TiB-header",
    "zstd",
    lambda: zstd_frame_claiming(1 << 40),
    "17-byte zstd frame whose header claims 1 TiB (1 KiB window)",
)
_bomb_case(
    "zstd-1TiB-single-segment",
    "zstd",
    lambda: zstd_frame_claiming(1 << 40, single_segment=True),
    "16-byte single-segment zstd frame claiming 1 TiB (window = 1 TiB)",
)
_bomb_case("zstd-bomb", "zstd", zstd_bomb, "real zstd frame inflating to 1 GiB (~32 KB file)")
_bomb_case("gzip-bomb", "gzip", gzip_bomb, "gzip stream inflating to 1 GiB (~1 MB file)")
_bomb_case("zlib-bomb-v2", "zlib-v2", zlib_bomb, "zlib stream inflating to 1 GiB (v2, ~1 MB)")


@cache
def bz2_bomb(total: int = 256 * MiB) -> bytes:
    """A bz2 stream inflating to `total` zero bytes (~200 bytes per MiB)."""
    import bz2

    co = bz2.BZ2Compressor(9)
    zeros = bytes(16 * MiB)
    out = b"".join(co.compress(zeros) for _ in range(total // len(zeros)))
    return out + co.flush()


def pcodec_count_bomb() -> bytes:
    """A standalone Pco file of 2^24 constant uint16 values (32 MiB) in a few dozen bytes."""
    import numcodecs

    return bytes(numcodecs.PCodec().encode(np.full(1 << 24, 5, dtype=DTYPE)))


_bomb_case(
    "lz4-4GiB-header",
    "lz4",
    lambda: struct.pack("<I", 0xFFFFFFF0) + b"\x00",
    "numcodecs lz4 block whose size prefix claims 4 GiB",
)
_bomb_case("bz2-bomb", "bz2", bz2_bomb, "bz2 stream inflating to 256 MiB (~50 KB file)")
_bomb_case(
    "pcodec-count-bomb",
    "pcodec",
    pcodec_count_bomb,
    "pcodec file of 2^24 constant values (32 MiB) for a 16-element chunk",
)


def _zfpy_claiming_huge(root: str) -> Built:
    """A float64 v2 zfpy array whose chunk (1, 1) is a valid zfpy stream of a 4096x4096
    field (128 MiB) where a 4x4 one is expected."""
    import numcodecs
    import zarr

    data = DATA.astype("<f8")
    with quiet_zarr():
        z = zarr.create_array(
            store=root, name="a", shape=SHAPE, chunks=CHUNKS, dtype="<f8",
            fill_value=FILL, zarr_format=2, compressors=numcodecs.ZFPY(),
        )  # fmt: skip
        z[...] = data
    key = stored_key("a", z, BAD)
    with open(key_file(root, key), "wb") as f:
        f.write(bytes(numcodecs.ZFPY().encode(np.zeros((4096, 4096)))))
    return Built(root, "a", BAD_REGION, key=key, good_value=data[GOOD_REGION])


case(
    "zfpy-header-claims-128MiB",
    "bombs and lying headers",
    DECODE,
    "zfpy stream whose header describes a 4096x4096 float64 field (128 MiB) for a 4x4 chunk",
    memory=True,
)(_zfpy_claiming_huge)


def _zfpy_damaged(damage: Callable[[bytes], bytes]) -> Callable[[str], Built]:
    def build(root: str) -> Built:
        import numcodecs
        import zarr

        data = DATA.astype("<f8")
        with quiet_zarr():
            z = zarr.create_array(
                store=root, name="a", shape=SHAPE, chunks=CHUNKS, dtype="<f8",
                fill_value=FILL, zarr_format=2, compressors=numcodecs.ZFPY(),
            )  # fmt: skip
            z[...] = data
        key = stored_key("a", z, BAD)
        file = key_file(root, key)
        with open(file, "rb") as f:
            good = f.read()
        with open(file, "wb") as f:
            f.write(damage(good))
        return Built(
            root, "a", BAD_REGION, key=key, good_value=data[GOOD_REGION],
            original=data[BAD_REGION],
        )  # fmt: skip

    return build


for _name, _damage, _what in [
    ("zfpy-truncated", lambda b: b[: len(b) // 2], "first half of a zfpy stream (float64, v2)"),
    ("zfpy-empty", lambda b: b"", "zero-length zfpy chunk (float64, v2)"),
    ("zfpy-garbage", lambda b: garbage(len(b)), "random bytes for a zfpy stream (float64, v2)"),
]:
    case(_name, "chunk bytes", DECODE, _what)(_zfpy_damaged(_damage))


def _blosc_2gib(b: bytes) -> bytes:
    return blosc_claiming(b, 0x7FFF0000)


case(
    "blosc-2GiB-header",
    "bombs and lying headers",
    DECODE,
    "blosc frame whose header claims 2 GiB (v3)",
    memory=True,
)(_corrupt_plain("blosc", _blosc_2gib))
case(
    "blosc-2GiB-header-v2",
    "bombs and lying headers",
    DECODE,
    "blosc frame whose header claims 2 GiB (v2)",
    memory=True,
)(_corrupt_plain("blosc-v2", _blosc_2gib))


@case(
    "crc32c-gzip-bomb",
    "bombs and lying headers",
    DECODE,
    "gzip bomb inside a valid crc32c (an outer, fully decoded stage)",
    memory=True,
)
def _crc_gzip_bomb(root: str) -> Built:
    from zarr.codecs import Crc32cCodec, GzipCodec

    z = write_plain(root, "none", compressors=[GzipCodec(), Crc32cCodec()])
    key = stored_key("a", z, BAD)
    with open(key_file(root, key), "wb") as f:
        f.write(with_crc32c(gzip_bomb()))
    return Built(root, "a", BAD_REGION, key=key)


@case(
    "fallback-zstd-1TiB-header",
    "bombs and lying headers",
    DECODE,
    "17-byte zstd frame claiming 1 TiB, on an array zarrs decodes (v2 FixedScaleOffset filter)",
    memory=True,
    tags=("fallback",),
)
def _fallback_zstd(root: str) -> Built:
    import numcodecs

    z = write_plain(
        root,
        "none",
        zarr_format=2,
        filters=[numcodecs.FixedScaleOffset(offset=0, scale=1, dtype="<u2")],
        compressors=numcodecs.Zstd(),
    )
    key = stored_key("a", z, BAD)
    with open(key_file(root, key), "wb") as f:
        f.write(zstd_frame_claiming(1 << 40))
    return Built(root, "a", BAD_REGION, key=key)


@case(
    "fallback-gzip-bomb",
    "bombs and lying headers",
    DECODE,
    "gzip bomb (1 GiB) on an array zarrs decodes (v2 FixedScaleOffset filter)",
    memory=True,
    tags=("fallback",),
)
def _fallback_gzip(root: str) -> Built:
    import numcodecs

    z = write_plain(
        root,
        "none",
        zarr_format=2,
        filters=[numcodecs.FixedScaleOffset(offset=0, scale=1, dtype="<u2")],
        compressors=numcodecs.GZip(),
    )
    key = stored_key("a", z, BAD)
    with open(key_file(root, key), "wb") as f:
        f.write(gzip_bomb())
    return Built(root, "a", BAD_REGION, key=key)


@case(
    "fallback-truncated",
    "chunk bytes",
    DECODE,
    "truncated zstd chunk on an array zarrs decodes (v2 FixedScaleOffset filter)",
    tags=("fallback",),
)
def _fallback_truncated(root: str) -> Built:
    import numcodecs

    z = write_plain(
        root,
        "none",
        zarr_format=2,
        filters=[numcodecs.FixedScaleOffset(offset=0, scale=1, dtype="<u2")],
        compressors=numcodecs.Zstd(),
    )
    key = stored_key("a", z, BAD)
    file = key_file(root, key)
    with open(file, "rb") as f:
        b = f.read()
    with open(file, "wb") as f:
        f.write(b[: len(b) // 2])
    return Built(root, "a", BAD_REGION, key=key)


@case(
    "fallback-crc32c-partial-read",
    "checksums",
    CHECKSUM,
    "crc32c mismatch, reading one element, on an array zarrs decodes (v3, numcodecs "
    "fixedscaleoffset filter)",
    tags=("fallback",),
)
def _fallback_crc_partial(root: str) -> Built:
    from zarr.codecs import Crc32cCodec
    from zarr.codecs.numcodecs import FixedScaleOffset

    z = write_plain(
        root,
        "none",
        filters=[FixedScaleOffset(offset=0, scale=1, dtype="<u2")],
        compressors=[Crc32cCodec()],
    )
    key = stored_key("a", z, BAD)
    file = key_file(root, key)
    with open(file, "rb") as f:
        b = bytearray(f.read())
    b[30] ^= 0x01  # the last element, far from the element read
    with open(file, "wb") as f:
        f.write(bytes(b))
    return Built(root, "a", (4, 4), key=key, original=DATA[4, 4])


# --- chunk shapes declaring ~2^40 elements, with a tiny file


def _huge_chunk(root: str, chunk: bytes, sel: Any) -> Built:
    """A (2^20, 2^20) uint8 array in one chunk (2^40 elements) whose only chunk is `chunk`."""
    os.makedirs(os.path.join(root, "a", "c", "0"), exist_ok=True)
    meta = v3_metadata((1 << 20, 1 << 20), (1 << 20, 1 << 20), "uint8", [ZSTD_V3])
    write_json(os.path.join(root, "a", "zarr.json"), meta)
    with open(os.path.join(root, "a", "c", "0", "0"), "wb") as f:
        f.write(chunk)
    return Built(root, "a", sel, key="a/c/0/0", good=None)


case(
    "huge-chunk-tiny-file",
    "bombs and lying headers",
    DECODE,
    "chunk shape of 2^40 uint8 elements, chunk file = zstd('tiny'); read [0, 0:8]",
    memory=True,
)(lambda root: _huge_chunk(root, encode("zstd", b"tiny"), (0, slice(0, 8))))
case(
    "huge-chunk-1TiB-frame",
    "bombs and lying headers",
    DECODE,
    "chunk shape of 2^40 uint8 elements whose 17-byte zstd frame claims exactly 1 TiB; "
    "read [0, 0:8]",
    memory=True,
)(lambda root: _huge_chunk(root, zstd_frame_claiming(1 << 40), (0, slice(0, 8))))


# --- checksums on partial reads


@case(
    "crc32c-partial-read",
    "checksums",
    CHECKSUM,
    "crc32c mismatch, reading one element of the chunk",
)
def _crc_partial(root: str) -> Built:
    z = write_plain(root, "crc32c")
    key = stored_key("a", z, BAD)
    file = key_file(root, key)
    with open(file, "rb") as f:
        b = bytearray(f.read())
    b[30] ^= 0x01  # the last element, far from the element read
    with open(file, "wb") as f:
        f.write(bytes(b))
    return Built(root, "a", (4, 4), key=key)


# ---------------------------------------------------------------------------------------------
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


def _meta_case(
    name: str,
    what: str,
    expect: Any,
    edit: Callable[[dict], Any],
    *,
    v2: bool = False,
    bad: Any = Ellipsis,
    stage: str = "open",
) -> None:
    """A valid array written by zarr-python whose metadata document is then replaced by
    `edit(document)` (a dict to dump, or a string written as is)."""

    def build(root: str) -> Built:
        write_plain(root, "zlib-v2" if v2 else "zstd")
        file = os.path.join(root, "a", ".zarray" if v2 else "zarr.json")
        with open(file) as f:
            doc = json.load(f)
        new = edit(doc)
        write_json(file, doc if new is None else new)
        return Built(root, "a", bad, good=None, original=None)

    case(name, "metadata", expect, what, stage=stage)(build)


def _set(**kv: Any) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        for k, v in kv.items():
            if v is _DELETE:
                del d[k]
            else:
                d[k] = v

    return edit


_DELETE = object()


def _chunk_shape(shape: list[int]) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        d["chunk_grid"]["configuration"]["chunk_shape"] = shape

    return edit


def _codec(name: str) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        d["codecs"].append({"name": name, "configuration": {}})

    return edit


_meta_case("meta-invalid-json", "zarr.json is not JSON", METADATA, lambda d: "{not json")
_meta_case("meta-empty-file", "zarr.json is empty", METADATA, lambda d: "")
_meta_case("meta-json-array", "zarr.json is a JSON list", METADATA, lambda d: "[1, 2]")
for _field in ("shape", "data_type", "chunk_grid", "codecs", "fill_value", "zarr_format"):
    _meta_case(
        f"meta-missing-{_field}",
        f"zarr.json without {_field!r}",
        METADATA,
        _set(**{_field: _DELETE}),
    )
_meta_case("meta-unknown-codec", "codecs list names an unknown codec", UNSUPPORTED,
           _codec("no_such_codec"))  # fmt: skip
_meta_case("meta-unknown-dtype", "data_type 'no_such_type'", UNSUPPORTED,
           _set(data_type="no_such_type"))  # fmt: skip
_meta_case("meta-negative-shape", "shape [-8, 8]", METADATA, _set(shape=[-8, 8]))
_meta_case("meta-shape-2^64", "shape [2^64, 8] (not a u64)", METADATA, _set(shape=[1 << 64, 8]))
_meta_case("meta-shape-float", "shape [8.5, 8]", METADATA, _set(shape=[8.5, 8]))
_meta_case("meta-zero-chunk", "chunk_shape [0, 4]", METADATA, _chunk_shape([0, 4]))
_meta_case("meta-negative-chunk", "chunk_shape [-4, 4]", METADATA, _chunk_shape([-4, 4]))
_meta_case("meta-rank-mismatch", "chunk_shape [4] for a 2-d shape", METADATA, _chunk_shape([4]))
_meta_case("meta-fill-value-type", "fill_value 'abc' for uint16", METADATA,
           _set(fill_value="abc"))  # fmt: skip
_meta_case("meta-fill-value-range", "fill_value 70000 for uint16", METADATA,
           _set(fill_value=70000))  # fmt: skip
_meta_case("meta-zarr-format-4", "zarr_format 4", METADATA, _set(zarr_format=4))
_meta_case(
    "meta-chunk-key-separator",
    "chunk_key_encoding separator '/../../'",
    METADATA,
    lambda d: d["chunk_key_encoding"]["configuration"].update(separator="/../../"),
)
_meta_case("meta-v2-invalid-json", ".zarray is not JSON", METADATA, lambda d: "{not json", v2=True)
_meta_case(
    "meta-v2-unknown-compressor",
    ".zarray compressor id 'no_such_codec'",
    UNSUPPORTED,
    _set(compressor={"id": "no_such_codec"}),
    v2=True,
)
_meta_case(
    "meta-v2-object-dtype",
    ".zarray dtype '|O' with numcodecs' JSON object codec (valid v2, Python objects)",
    UNSUPPORTED,
    _set(dtype="|O", fill_value=None, filters=[{"id": "json2", "encoding": "utf-8"}]),
    v2=True,
)
_meta_case("meta-v2-missing-chunks", ".zarray without 'chunks'", METADATA,
           _set(chunks=_DELETE), v2=True)  # fmt: skip
_meta_case("meta-v2-negative-shape", ".zarray shape [-8, 8]", METADATA,
           _set(shape=[-8, 8]), v2=True)  # fmt: skip
_meta_case(
    "meta-v2-dimension-separator",
    ".zarray dimension_separator '/../../secret/' (chunk keys escaping the store)",
    METADATA,
    _set(dimension_separator="/../../secret/"),
    v2=True,
)


@case(
    "meta-absurd-shape",
    "metadata",
    METADATA,
    "shape [2^62, 2^62] in chunks [2^31, 2^31], no chunks written: read [0:2, 0:2]",
    stage="open",
)
def _absurd_shape(root: str) -> Built:
    meta = v3_metadata((1 << 62, 1 << 62), (1 << 31, 1 << 31), "uint16", [ZSTD_V3], FILL)
    write_json(os.path.join(root, "a", "zarr.json"), meta)
    return Built(
        root, "a", (slice(0, 2), slice(0, 2)), good=None, expected=np.full((2, 2), FILL, DTYPE)
    )


# ---------------------------------------------------------------------------------------------
# variable-length strings and bytes: the vlen-utf8 / vlen-bytes chunk format (a u32 count,
# then per element a u32 length and its bytes) damaged in an uncompressed chunk

VLEN_TEXT = np.array([f"s{i}-" + "é" * (i % 3) for i in range(64)], dtype=object).reshape(SHAPE)
VLEN_BYTES = np.array([bytes([i % 7]) * (i % 5) for i in range(64)], dtype=object).reshape(SHAPE)


def write_vlen(root: str, kind: str) -> tuple[Any, np.ndarray]:
    """An 8x8 array of strings ("utf8", v3) or bytes ("bytes-v2") in 4x4 uncompressed chunks."""
    import zarr
    from zarr.core.dtype import VariableLengthBytes

    data = VLEN_TEXT if kind == "utf8" else VLEN_BYTES
    with quiet_zarr():
        z = zarr.create_array(
            store=root,
            name="a",
            shape=SHAPE,
            chunks=CHUNKS,
            dtype=str if kind == "utf8" else VariableLengthBytes(),
            compressors=None,
            zarr_format=3 if kind == "utf8" else 2,
        )
        z[...] = data
    return z, data


def _corrupt_vlen(
    kind: str, damage: Callable[[bytes], bytes], readable: bool = False
) -> Callable[[str], Built]:
    def build(root: str) -> Built:
        z, data = write_vlen(root, kind)
        key = stored_key("a", z, BAD)
        file = key_file(root, key)
        with open(file, "rb") as f:
            good = f.read()
        with open(file, "wb") as f:
            f.write(damage(good))
        return Built(
            root, "a", BAD_REGION, key=key, good_value=data[GOOD_REGION],
            original=data[BAD_REGION], expected=data[BAD_REGION] if readable else None,
        )  # fmt: skip

    return build


def _vlen_length_past_end(b: bytes) -> bytes:
    # the first element's length (after the 4-byte count) claims 2^31 bytes
    return b[:4] + struct.pack("<I", 1 << 31) + b[8:]


def _vlen_bad_utf8(b: bytes) -> bytes:
    # the first element's first byte (after count and length) becomes 0xff
    return b[:8] + b"\xff" + b[9:]


def _register_vlen_cases() -> None:
    damages: dict[str, tuple[Callable[[bytes], bytes], str]] = {
        "truncated": (lambda b: b[: len(b) // 2], "first half of the chunk file"),
        "empty": (lambda b: b"", "zero-length chunk file"),
        "length-past-end": (_vlen_length_past_end, "an element length of 2^31 bytes"),
        "huge-count": (
            lambda b: struct.pack("<I", 0xFFFFFFFF) + b[4:],
            "an element count of 2^32-1 in the header",
        ),
    }
    for kind, label in (("utf8", "vlen-utf8"), ("bytes-v2", "vlen-bytes-v2")):
        for damage_name, (fn, what) in damages.items():
            name = f"{label}-{damage_name}"
            case(name, "vlen chunks", DECODE, f"{label}: {what}", tags=("vlen",))(
                _corrupt_vlen(kind, fn)
            )
        # numcodecs ignores bytes after the last element, so zarrpipe reads such a chunk too
        leftover = _corrupt_vlen(kind, lambda b: b + b"\x00\x01", readable=True)
        case(f"{label}-leftover", "vlen chunks", "value",
             f"{label}: two bytes after the last element (valid: numcodecs ignores them)",
             tags=("vlen",))(leftover)  # fmt: skip
    case("vlen-utf8-bad-utf8", "vlen chunks", DECODE, "vlen-utf8: an element that is not UTF-8",
         tags=("vlen",))(_corrupt_vlen("utf8", _vlen_bad_utf8))  # fmt: skip


_register_vlen_cases()


# ---------------------------------------------------------------------------------------------
# paths, stores and permissions

SECRET = 0xBEEF


def _secret_and_store(root: str) -> str:
    """root/secret: a valid array full of 0xBEEF (a valid v2 chunk "0" too, for chunk keys
    that escape); root/store: the store (a group with array "a"). Returns the store root."""
    store = os.path.join(root, "store")
    secret = np.full(SHAPE, SECRET, dtype=DTYPE)
    write_plain(root, "none", path="secret", data=secret)
    with open(os.path.join(root, "secret", "0"), "wb") as f:
        f.write(secret[:4, :4].tobytes())
    write_plain(store, "zstd")
    return store


def _path_case(
    name: str, array_path: Callable[[str], str], what: str, expect: type = ValueError
) -> None:
    def build(root: str) -> Built:
        store = _secret_and_store(root)
        return Built(store, array_path(root), Ellipsis, good=None, original=None)

    case(name, "paths", expect, what, stage="open", tags=("secret",))(build)


# A path with `.`, `..` or `\` in it is refused as such; an absolute one is a name under the store.
_path_case("path-dotdot", lambda r: "../secret", "array path '../secret'")
_path_case("path-dotdot-nested", lambda r: "a/../../secret", "array path 'a/../../secret'")
_path_case("path-dot-dotdot", lambda r: "./../secret", "array path './../secret'")
_path_case(
    "path-absolute",
    lambda r: os.path.join(r, "secret"),
    "absolute array path",
    expect=FileNotFoundError,
)
_path_case("path-backslash", lambda r: "..\\secret", "array path '..\\\\secret'")
_path_case("path-trailing-dotdot", lambda r: "a/..", "array path 'a/..' (the store root)")


@case(
    "meta-v2-dimension-separator-escape",
    "paths",
    METADATA,
    "v2 root array whose dimension_separator '/../../secret/' makes chunk (0, 0) the key "
    "'0/../../secret/0' (outside the store)",
    stage="open",
    tags=("secret",),
)
def _separator_escape(root: str) -> Built:
    store = _secret_and_store(root)
    shutil.rmtree(store)
    write_plain(store, "none", path="", data=DATA, zarr_format=2)
    file = os.path.join(store, ".zarray")
    with open(file) as f:
        doc = json.load(f)
    doc["dimension_separator"] = "/../../secret/"
    write_json(file, doc)
    os.makedirs(os.path.join(store, "0"))  # so that the OS resolves "0/.." too
    assert os.path.exists(os.path.join(store, "0", "..", "..", "secret", "0"))
    return Built(store, "", (slice(0, 4), slice(0, 4)), good=None)


@case("store-missing", "paths", FileNotFoundError, "store directory does not exist",
      stage="open")  # fmt: skip
def _missing_store(root: str) -> Built:
    return Built(os.path.join(root, "no", "such", "store"), "a", Ellipsis, good=None)


@case("array-missing", "paths", FileNotFoundError, "no array at the path", stage="open")
def _missing_array(root: str) -> Built:
    write_plain(root, "zstd")
    return Built(root, "nope", Ellipsis, good=None)


@case("store-is-a-file", "paths", FileNotFoundError, "store path is a regular file",
      stage="open")  # fmt: skip
def _store_file(root: str) -> Built:
    os.makedirs(root, exist_ok=True)
    file = os.path.join(root, "file")
    with open(file, "wb") as f:
        f.write(b"not a store")
    return Built(file, "a", Ellipsis, good=None)


@case("chunk-is-a-directory", "paths", OSError,
      "the chunk's key is a directory (with a file inside)")  # fmt: skip
def _chunk_dir(root: str) -> Built:
    z = write_plain(root, "zstd")
    key = stored_key("a", z, BAD)
    file = key_file(root, key)
    os.remove(file)
    os.makedirs(file)
    with open(os.path.join(file, "x"), "wb") as f:
        f.write(b"x")
    return Built(root, "a", BAD_REGION, key=key)


def _permission_case(name: str, which: str, what: str, stage: str) -> None:
    def build(root: str) -> Built:
        z = write_plain(root, "zstd")
        key = stored_key("a", z, BAD)
        target = key_file(root, key) if which == "chunk" else os.path.join(root, "a", "zarr.json")
        os.chmod(target, 0)
        if which == "chunk":
            return Built(root, "a", BAD_REGION, key=key)
        return Built(root, "a", BAD_REGION, good=None)

    case(name, "paths", PermissionError, what, stage=stage, tags=("unprivileged",))(build)


_permission_case("chunk-permission-denied", "chunk", "chunk file chmod 000", "read")
_permission_case("metadata-permission-denied", "meta", "zarr.json chmod 000", "open")


# ---------------------------------------------------------------------------------------------
# selections


def _selection_case(name: str, sel: Any, expect: Any, what: str) -> None:
    def build(root: str) -> Built:
        write_plain(root, "zstd")
        try:  # NumPy's answer, to tell a supported selection from a wrong one
            original = np.asarray(DATA[sel])
        except Exception:
            original = None
        return Built(root, "a", sel, original=original)

    case(name, "selections", expect, what)(build)


_selection_case("sel-int-out-of-range", (8, 0), IndexError, "a[8, 0] (axis 0 has 8)")
_selection_case("sel-negative-out-of-range", (-9,), IndexError, "a[-9]")
_selection_case("sel-too-many-indices", (0, 0, 0), IndexError, "a[0, 0, 0] on a 2-d array")
_selection_case("sel-step-0", (slice(None, None, 0),), ValueError, "a[::0] (NumPy: ValueError)")
_selection_case("sel-float", (1.5,), IndexError, "a[1.5] (NumPy: IndexError)")
_selection_case("sel-str", ("a",), IndexError, "a['a'] (NumPy: IndexError)")
_selection_case("sel-array-out-of-range", ([0, 8],), IndexError, "a[[0, 8]]")
_selection_case("sel-mask-wrong-length", (np.ones(3, bool),), IndexError, "a[mask of 3]")
_selection_case("sel-two-ellipses", (Ellipsis, Ellipsis), IndexError, "a[..., ...]")
_selection_case("sel-huge-int", (1 << 70,), IndexError, "a[2**70]")


# ---------------------------------------------------------------------------------------------
# assertions shared by the tests


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """("value", result) or ("raised", exception) — whatever the exception's base class is
    (a pyo3 PanicException derives from BaseException only and must be caught to be seen)."""
    try:
        return "value", fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        return "raised", e


def assert_raises(
    fn: Callable[[], Any], types: Any, *, key: str | None = None, what: str = ""
) -> BaseException:
    """`fn()` raises an Exception (not a BaseException-only panic) that is an instance of
    `types` and, when `key` is given, names it in its message."""
    kind, v = outcome(fn)
    assert kind == "raised", f"{what}: expected {types}, got a value {v!r}"
    assert isinstance(v, Exception), (
        f"{what}: {type(v).__module__}.{type(v).__qualname__} is not an Exception subclass "
        f"(a panic crossing into Python?): {v}"
    )
    assert isinstance(v, types), f"{what}: expected {types}, got {type(v).__qualname__}: {v}"
    if key is not None:
        assert key in str(v), f"{what}: the error should name {key!r}: {v}"
    return v


def might_allocate(nbytes: int) -> bool:
    """Whether this machine might actually grant (and then fill) `nbytes`: more than a quarter
    of its RAM is refused by the kernel's default overcommit heuristic, but not under
    "always overcommit" (vm.overcommit_memory = 1), where filling it would summon the OOM
    killer instead of raising MemoryError."""
    with open("/proc/meminfo") as f:
        mem_total = int(f.read().split("MemTotal:")[1].split()[0]) * 1024
    try:
        with open("/proc/sys/vm/overcommit_memory") as f:
            always = f.read().strip() == "1"
    except OSError:
        always = False
    return nbytes <= 4 * mem_total or (always and nbytes < 1 << 47)


def assert_healthy(scratch: str) -> None:
    """The process still reads correctly: a fresh array, a fresh Store, several threads."""
    import zarrpipe

    os.makedirs(scratch, exist_ok=True)
    data = (np.arange(12 * 10, dtype="<i4").reshape(12, 10) - 50) * 7
    if not os.path.exists(os.path.join(scratch, "healthy", "zarr.json")):
        write_plain(scratch, "zstd", path="healthy", data=data, chunks=(5, 3), fill_value=0)
    arr = zarrpipe.Store(scratch).open_array("healthy")
    np.testing.assert_array_equal(np.asarray(arr[...]), data)
    np.testing.assert_array_equal(np.asarray(arr[3:11, 2:9]), data[3:11, 2:9])
    (t,) = arr.read_chunks([(1, 1)])
    np.testing.assert_array_equal(np.asarray(t), data[5:10, 3:6])


# ---------------------------------------------------------------------------------------------
# running one case in a subprocess


def build_case(name: str, root: str) -> Built:
    return CASES[name].build(root)


_CHILD = r"""
import json, os, sys, traceback, warnings
sys.path.insert(0, {here!r})
warnings.simplefilter("ignore")
args = json.loads(sys.argv[1])
import numpy as np
import fault_stores as fs
import zarrpipe
if args["reader"] != "zarrpipe":
    import zarr
if args.get("unprivileged"):  # after the imports: the interpreter may live under /root
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
print(json.dumps(fs._child_read(args)), flush=True)
"""


def _status(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field_name)


def _eval_selection(text: str) -> Any:
    return eval(text, {"__builtins__": {}, "slice": slice, "Ellipsis": Ellipsis})


def _describe_exception(e: BaseException) -> dict[str, Any]:
    return {
        "type": type(e).__module__ + "." + type(e).__qualname__,
        "message": str(e)[:300],
        "is_exception": isinstance(e, Exception),
        "mro": [t.__qualname__ for t in type(e).__mro__],
    }


def _plain(a: np.ndarray | None) -> Any:
    """An array as JSON for the child: nested lists, `bytes` spelled "bytes:<hex>" (the
    variable-length cases hold strings and bytes)."""
    if a is None:
        return None
    if a.dtype.kind not in "OT":
        return a.tolist()
    return np.vectorize(lambda x: "bytes:" + x.hex() if isinstance(x, bytes) else x,
                        otypes=[object])(a).tolist()  # fmt: skip


def _same(value: np.ndarray, want: Any) -> bool:
    """A read's result equals `want` (what `_plain` made of the expected array)."""
    want_arr = np.asarray(want, dtype=object)
    if value.dtype.kind in "OT" or (
        want_arr.dtype.kind == "O" and want_arr.size and isinstance(want_arr.flat[0], str)
    ):
        return value.shape == want_arr.shape and _plain(value.astype(object)) == want
    want_num = np.asarray(want, dtype=DTYPE)
    return bool(value.shape == want_num.shape and np.array_equal(value, want_num))


def _child_read(args: dict[str, Any]) -> dict[str, Any]:
    """In the subprocess: open and read as `args` says, with the reader named there."""
    reader = args["reader"]
    out: dict[str, Any] = {"reader": reader}
    sel = _eval_selection(args["bad"])
    if reader == "zarrpipe":
        import zarrpipe

        def open_(root: str, path: str) -> Any:
            # Read-only, as zarr-python opens it below (read-write creates a missing store).
            return zarrpipe.Store(root, mode="r").open_array(path)

        def read(arr: Any, s: Any) -> np.ndarray:
            return np.asarray(arr[s])
    else:
        import zarr

        if reader == "zarr-zarrpipe-pipeline":
            zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"})

        def open_(root: str, path: str) -> Any:
            return zarr.open_array(store=root, path=path, mode="r")

        def read(arr: Any, s: Any) -> np.ndarray:
            return np.asarray(arr[s])

    try:
        with open("/proc/self/clear_refs", "w") as f:  # reset the peak-RSS mark
            f.write("5")
    except OSError:  # not allowed (an unprivileged child): growth is then relative to the peak
        out["rss_peak_not_reset"] = True
    rss0 = _status("VmRSS")
    stage = "open"
    try:
        arr = open_(args["store"], args["path"])
        stage = "read"
        value = read(arr, sel)
    except BaseException as e:  # recorded, whatever it is
        out.update(outcome="raised", stage=stage, **_describe_exception(e))
    else:
        out.update(outcome="returned", shape=list(value.shape), dtype=str(value.dtype))
        for what in ("expected", "original"):
            if args.get(what) is not None:
                out[what + "_equal"] = _same(value, args[what])
        numeric = value.dtype.kind not in "OTUSV"
        out["secret_seen"] = bool(numeric and value.size and (value == SECRET).any())
        out["fill_only"] = bool(numeric and value.size and (value == FILL).all())
    out["rss_growth"] = _status("VmHWM") - rss0
    if args.get("good") is not None:
        try:
            arr = open_(args["store"], args["path"])
            value = read(arr, _eval_selection(args["good"]))
            out["after_ok"] = _same(value, args["good_value"])
        except BaseException as e:
            out["after_ok"] = False
            out["after_error"] = repr(e)[:200]
    return out


def observe(name: str, reader: str = "zarrpipe", *, timeout: float = 120) -> dict[str, Any]:
    """Builds case `name` in a fresh directory and reads it with `reader` ("zarrpipe",
    "zarr" = zarr-python's default pipeline, or "zarr-zarrpipe-pipeline") in a subprocess.
    Returns the child's report, or {"outcome": "timeout"} / {"outcome": "crashed", ...}."""
    c = CASES[name]
    tmp = tempfile.mkdtemp(prefix="zp-fault-")
    try:
        os.chmod(tmp, 0o755)  # an unprivileged child must reach the store
        built = c.build(tmp)
        args = {
            "reader": reader,
            "store": built.store_path or built.root,
            "path": built.path,
            "bad": repr(built.bad),
            "good": repr(built.good) if built.good is not None else None,
            "good_value": _plain(built.good_value),
            "expected": _plain(built.expected),
            "original": _plain(built.original),
            "unprivileged": "unprivileged" in c.tags and os.geteuid() == 0,
        }
        env = dict(os.environ, RUST_BACKTRACE="0", PYTHONWARNINGS="ignore")
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _CHILD.format(here=HERE), json.dumps(args)],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            return {"outcome": "timeout", "timeout": timeout, "key": built.key}
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            return {
                "outcome": "crashed",
                "returncode": proc.returncode,
                "stderr": proc.stderr[-2000:],
                "key": built.key,
            }
        report = json.loads(lines[-1])
        report["key"] = built.key
        return report
    finally:
        _force_rmtree(tmp)


def _force_rmtree(path: str) -> None:
    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, n), 0o755, follow_symlinks=False)
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# the table of docs/reliability.md


def memory_bound(chunk_nbytes: int = CHUNK_NBYTES) -> int:
    """Peak RSS growth allowed for reading a hostile chunk: 64 MiB + a few chunks."""
    return 64 * MiB + 4 * chunk_nbytes


def summarize(report: dict[str, Any], c: Case | None = None, *, key_check: bool = True) -> str:
    """One table cell: what the reader did (`key_check`: say whether an error names the
    chunk key)."""
    outcome = report["outcome"]
    if outcome == "timeout":
        return f"**hangs** (killed after {report['timeout']:.0f} s)"
    if outcome == "crashed":
        rc = report["returncode"]
        how = f"signal {-rc}" if rc < 0 else f"exit code {rc}"
        tail = [ln for ln in report["stderr"].splitlines() if ln.strip()]
        msg = tail[-1][:100] if tail else ""
        if any("memory allocation of" in ln for ln in tail):
            msg = next(ln for ln in tail if "memory allocation of" in ln)[:100]
        return f"**process aborts** ({how}: `{_cell(msg)}`)"
    mem = ""
    if c is not None and c.memory:
        growth = report["rss_growth"]
        mem = f"; peak RSS +{growth / MiB:.0f} MiB"
        if growth > memory_bound():
            mem = f"; **peak RSS +{growth / MiB:.0f} MiB**"
    after = ""
    if report.get("after_ok") is False:
        after = "; **a valid read afterwards fails**"
    if outcome == "raised":
        t = report["type"].replace("builtins.", "").replace("zarrpipe._zarrpipe.", "zarrpipe.")
        t = t.replace("zarrpipe.", "")
        if not report["is_exception"]:
            t = f"**{t} (BaseException only)**"
        where = f" at {report['stage']}" if c is not None and report["stage"] != c.stage else ""
        named = ""
        key = report.get("key")
        if key_check and key and report["stage"] == "read":
            named = ", names the key" if key in report["message"] else ", key not named"
        msg = _cell(report["message"][:70])
        return f"{t}{where}{named}: `{msg}`{mem}{after}"
    # returned data
    if report.get("secret_seen"):
        return f"**returns data from outside the store**{mem}"
    if report.get("expected_equal") is True:
        return f"correct value{mem}{after}"
    if report.get("expected_equal") is False:
        return f"**wrong value**{mem}{after}"
    if report.get("original_equal") is True:
        if c is not None and c.section == "selections":
            return "returns NumPy's answer (a selection zarr-python supports)"
        if c is not None and "value" not in allowed_outcomes(c):
            return f"**no error**: returns the undamaged values{mem}{after}"
        return f"returns the original data{mem}{after}"
    if report.get("fill_only"):
        return f"**returns the fill value, no error**{mem}{after}"
    return f"**returns wrong data, no error** (shape {tuple(report['shape'])}){mem}{after}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")


SECTIONS = [
    "chunk bytes",
    "checksums",
    "bombs and lying headers",
    "shards",
    "shards decoded by zarrs (fallback path)",
    "metadata",
    "paths",
    "selections",
]


def collect(names: list[str] | None = None, *, timeout: float = 120) -> dict[str, Any]:
    """Runs each case with zarrpipe and with zarr-python's default pipeline (subprocesses):
    {name: {"zarrpipe": report, "zarr": report}}."""
    out = {}
    for name in names or list(CASES):
        out[name] = {r: observe(name, r, timeout=timeout) for r in ("zarrpipe", "zarr")}
        print(name, file=sys.stderr, flush=True)
    return out


def render(reports: dict[str, Any]) -> str:
    """The markdown table of docs/reliability.md, grouped by section."""
    rows = ["| case | what | zarrpipe | zarr-python (default pipeline) |", "|---|---|---|---|"]
    for section in SECTIONS + sorted({c.section for c in CASES.values()} - set(SECTIONS)):
        names = [n for n, c in CASES.items() if c.section == section and n in reports]
        if not names:
            continue
        rows.append(f"| **{section}** | | | |")
        for name in names:
            c = CASES[name]
            zp = summarize(reports[name]["zarrpipe"], c)
            zr = summarize(reports[name]["zarr"], c, key_check=False)
            rows.append(f"| `{name}` | {_cell(c.what)} | {zp} | {zr} |")
    return "\n".join(rows)


def reliability_table(names: list[str] | None = None, *, timeout: float = 120) -> str:
    return render(collect(names, timeout=timeout))


if __name__ == "__main__":
    # python tests/fault_stores.py [--json FILE] [case ...]: the table on stdout; with --json,
    # the raw reports are also written to FILE (or re-rendered from it if it exists).
    argv = sys.argv[1:]
    json_file = None
    if argv[:1] == ["--json"]:
        json_file, argv = argv[1], argv[2:]
    if json_file and os.path.exists(json_file):
        with open(json_file) as f:
            reports = json.load(f)
    else:
        reports = collect(argv or None)
        if json_file:
            with open(json_file, "w") as f:
                json.dump(reports, f)
    print(render(reports))
