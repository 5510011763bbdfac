"""Fault cases of one damaged chunk: garbage, truncation and bit flips under each compressor,
decompression bombs and lying headers, and the same through the zarrs fallback path."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from .registry import CHECKSUM, DECODE, Built, case
from .stores import (
    BAD,
    BAD_REGION,
    CHUNKS,
    COMPRESSORS,
    DATA,
    DTYPE,
    FILL,
    GOOD_REGION,
    PLUGIN_CODECS,
    RAW_KINDS,
    SHAPE,
    ZSTD_V3,
    MiB,
    blosc_claiming,
    encode,
    garbage,
    gzip_bomb,
    key_file,
    quiet_zarr,
    stored_key,
    v3_metadata,
    with_crc32c,
    write_json,
    write_plain,
    zlib_bomb,
    zstd_bomb,
    zstd_frame_claiming,
)


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
