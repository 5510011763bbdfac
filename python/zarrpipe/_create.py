"""Normalises `Store.create_array`'s Python arguments (NumPy dtypes, codec objects, fill
values) into the JSON spec the engine builds array metadata from."""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

# NumPy dtype names the engine creates arrays of.
_NAMES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128", "bfloat16",
}  # fmt: skip


def _dtype(dtype: Any) -> tuple[str, bool]:
    dt = np.dtype(dtype)
    name = dt.name
    if name not in _NAMES:
        # ml_dtypes' bfloat16 has kind "V" and name "bfloat16"
        raise TypeError(f"zarrpipe cannot create arrays of dtype {dt} yet")
    return name, dt.byteorder == ">" or (dt.byteorder == "=" and np.little_endian is False)


def _shape(value: Any, what: str) -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, Sequence) or hasattr(value, "__iter__"):
        return [operator.index(v) for v in value]
    return [operator.index(value)]


def _codec(codec: Any) -> dict[str, Any]:
    """A codec as JSON: a v3 dict, a numcodecs config, or either kind of codec object."""
    if isinstance(codec, dict):
        return dict(codec)
    if hasattr(codec, "get_config") and hasattr(codec, "codec_id"):  # numcodecs
        return dict(codec.get_config())
    if hasattr(codec, "to_dict"):  # zarr-python codecs (v3 and its numcodecs wrappers)
        try:
            spec = json.loads(json.dumps(codec.to_dict()))
            # Fields the user left unset (BloscCodec's typesize and shuffle) report
            # placeholders: zarr-python evolves them from the data type, and so does the
            # engine when they are absent.
            config = spec.get("configuration")
            if isinstance(config, dict):
                for name in getattr(codec, "_tunable_attrs", ()):
                    config.pop(name, None)
            return spec
        except (TypeError, ValueError):
            # Not evolved to a data type yet (e.g. BloscCodec() without typesize): the
            # engine fills zarr-python's defaults from the name.
            return {"name": codec.to_dict(omit_fill_value=True)["name"]}  # pragma: no cover
    raise TypeError(f"{codec!r} is not a codec: pass a dict, a numcodecs or zarr codec")


def _codecs(value: Any) -> list[dict[str, Any]] | None:
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"codecs must be 'auto', None, a codec or a list, not {value!r}")
        return None
    if value is None:
        return []
    if isinstance(value, dict) or not isinstance(value, Sequence):
        value = [value]
    return [_codec(c) for c in value]


def _number(x: Any) -> Any:
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    f = float(x)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def _fill(value: Any, dtype: str) -> Any:
    if value is None:
        return None
    if dtype.startswith("complex"):
        c = complex(value)
        return [_number(c.real), _number(c.imag)]
    if dtype == "bool":
        return bool(value)
    if dtype.startswith(("int", "uint")):
        return int(value)
    return _number(float(value))


# Chunk sizes guessed for `chunks=None`: the same targets as zarr-python's "auto" (and h5py's),
# so an array made here chunks like one zarr-python makes.
_CHUNK_BASE = 256 << 10
_CHUNK_MIN = 128 << 10
_CHUNK_MAX = 64 << 20


def guess_chunks(shape: list[int], itemsize: int) -> list[int]:
    """A chunk shape for an array (or a shard) of `shape`: the target size grows with the
    array's, from 128 KiB to 64 MiB; axes are halved in turn until a chunk is near it."""
    chunks = [max(int(n), 1) for n in shape]
    total = math.prod(chunks) * itemsize
    target = _CHUNK_BASE * 2 ** math.log10(max(total, 1) / (1 << 20))
    target = min(max(target, _CHUNK_MIN), _CHUNK_MAX)
    axis = 0
    while chunks:
        nbytes = math.prod(chunks) * itemsize
        near = nbytes < target or abs(nbytes - target) / target < 0.5
        if (near and nbytes < _CHUNK_MAX) or math.prod(chunks) == 1:
            break
        k = axis % len(chunks)
        chunks[k] = -(-chunks[k] // 2)
        axis += 1
    return chunks


def array_spec_json(
    *,
    shape: Any,
    dtype: Any,
    chunks: Any,
    shards: Any,
    compressors: Any,
    filters: Any,
    fill_value: Any,
    attributes: Any,
    dimension_names: Any,
    zarr_format: int,
) -> str:
    name, big_endian = _dtype(dtype)
    if chunks is None:
        within = _shape(shape, "shape") if shards is None else _shape(shards, "shards")
        chunks = guess_chunks(within, 2 if name == "bfloat16" else np.dtype(name).itemsize)
    spec = {
        "shape": _shape(shape, "shape"),
        "dtype": name,
        "big_endian": big_endian,
        "chunks": _shape(chunks, "chunks"),
        "shards": _shape(shards, "shards"),
        "compressors": _codecs(compressors),
        "filters": _codecs(filters) if filters != "auto" else None,
        "fill_value": _fill(fill_value, name),
        "attributes": dict(attributes or {}),
        "dimension_names": None if dimension_names is None else list(dimension_names),
        "zarr_format": int(zarr_format),
    }
    return json.dumps(spec)
