"""Fault cases of variable-length chunks (vlen-utf8, vlen-bytes): counts and lengths past the
end, invalid UTF-8."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from .registry import DECODE, Built, case
from .stores import BAD, BAD_REGION, CHUNKS, GOOD_REGION, SHAPE, key_file, quiet_zarr, stored_key

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
