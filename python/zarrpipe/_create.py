"""Normalises `Store.create_array`'s Python arguments (NumPy dtypes, codec objects, fill
values) into the JSON spec the engine builds array metadata from."""

from __future__ import annotations

import base64
import json
import math
import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

# NumPy dtype names the engine creates arrays of.
_NAMES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128", "bfloat16",
}  # fmt: skip


# ml_dtypes' one-byte floats, created as Zarr v3 data types of the same name.
_SMALL_FLOATS = {
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn",
    "float6_e3m2fn",
}  # fmt: skip


def _dtype(dtype: Any) -> tuple[str, bool]:
    dt = np.dtype(dtype)
    name = dt.name
    if name not in _NAMES:
        # ml_dtypes' bfloat16 has kind "V" and name "bfloat16"
        raise TypeError(f"zarrpipe cannot create arrays of dtype {dt} yet")
    return name, dt.byteorder == ">" or (dt.byteorder == "=" and np.little_endian is False)


def _is_spelled_out(dt: np.dtype[Any]) -> bool:
    """A fixed-size type beyond numbers and bool, created from its metadata spelling."""
    return (dt.kind in "MmUSV" and not dt.hasobject and dt.name not in _NAMES) or (
        dt.name in _SMALL_FLOATS
    )


def _v3_name(dt: np.dtype[Any]) -> Any:
    """The Zarr v3 spelling of a NumPy dtype (zarr-python 3.4's, when zarr is not installed)."""
    if dt.names is not None:
        fields = [{"name": n, "data_type": _v3_name(dt.fields[n][0])} for n in dt.names]  # type: ignore[index]
        return {"name": "struct", "configuration": {"fields": fields}}
    if dt.kind in "Mm":
        unit, scale = np.datetime_data(dt)
        name = "numpy.datetime64" if dt.kind == "M" else "numpy.timedelta64"
        return {"name": name, "configuration": {"unit": unit, "scale_factor": scale}}
    named = {"U": "fixed_length_utf32", "S": "null_terminated_bytes", "V": "raw_bytes"}
    if dt.kind in named and dt.name not in _SMALL_FLOATS:
        return {"name": named[dt.kind], "configuration": {"length_bytes": dt.itemsize}}
    return dt.name


def _v2_name(dt: np.dtype[Any]) -> Any:
    if dt.names is None:
        return dt.str
    fields: list[list[Any]] = []
    for n in dt.names:
        field = dt.fields[n][0]  # type: ignore[index]
        if field.subdtype is None:
            fields.append([n, _v2_name(field)])
        else:
            fields.append([n, _v2_name(field.subdtype[0]), list(field.subdtype[1])])
    return fields


def _scalar_json(dt: np.dtype[Any], value: Any) -> Any:
    """A fill value as zarr-python spells it (without zarr installed)."""
    scalar = np.zeros((), dtype=dt) if value is None else np.asarray(value, dtype=dt)
    if dt.kind in "Mm":
        if value is None or np.isnat(scalar):
            return "NaT"
        return int(scalar.view(np.int64))
    if dt.kind == "U":
        return str(scalar)
    if dt.name in _SMALL_FLOATS:
        return f"0x{int(scalar.reshape(1).view(np.uint8)[0]):02x}"
    return base64.standard_b64encode(scalar.tobytes()).decode("ascii")


def _spelled_out(dt: np.dtype[Any], fill_value: Any, zarr_format: int) -> tuple[Any, Any]:
    """(data type, fill value) as the installed zarr-python writes them, or as zarr-python
    3.4 does when zarr is not installed."""
    try:
        from zarr.core.dtype import get_data_type_from_native_dtype
    except ImportError:
        zdt = None
    else:
        try:
            zdt = get_data_type_from_native_dtype(dt)
        except (TypeError, ValueError):
            zdt = None  # not a zarr-python type (ml_dtypes' small floats)
    if zdt is None:
        name = _v2_name(dt) if zarr_format == 2 else _v3_name(dt)
        return name, _scalar_json(dt, fill_value)
    with warnings.catch_warnings():
        # zarr-python warns that some v3 spellings are not in the spec yet.
        warnings.simplefilter("ignore")
        spelled = zdt.to_json(zarr_format=zarr_format)  # type: ignore[call-overload]
        name = spelled["name"] if zarr_format == 2 else spelled
        scalar = zdt.default_scalar() if fill_value is None else zdt.cast_scalar(fill_value)
        fill = zdt.to_json_scalar(scalar, zarr_format=zarr_format)  # type: ignore[arg-type]
    return name, fill


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


def _object_codec(dtype: Any) -> str | None:
    """The codec of a variable-length type: `str`, `"string"`, NumPy's `StringDType` are
    strings (vlen-utf8); `bytes`, `"variable_length_bytes"` byte strings (vlen-bytes); also
    zarr-python's `VariableLengthUTF8()` / `VariableLengthBytes()`."""
    if dtype is str or (isinstance(dtype, str) and dtype == "string"):
        return "vlen-utf8"
    if dtype is bytes or (isinstance(dtype, str) and dtype == "variable_length_bytes"):
        return "vlen-bytes"
    # zarr-python's own data type objects.
    kind = type(dtype).__name__
    if kind in ("VariableLengthUTF8", "VariableLengthBytes"):
        return "vlen-utf8" if kind == "VariableLengthUTF8" else "vlen-bytes"
    dt = np.dtype(dtype)
    if dt.kind == "T" or (dt.kind == "U" and dt.itemsize == 0):
        return "vlen-utf8"
    if dt.kind == "S" and dt.itemsize == 0:
        return "vlen-bytes"
    if dt.kind == "O":
        raise TypeError(
            "dtype object is ambiguous: pass str (variable-length strings) or bytes "
            "(variable-length bytes)"
        )
    return None


def _variable_fill(codec: str, value: Any) -> Any:
    if value is None:
        return None
    if codec == "vlen-utf8":
        return str(value)
    return base64.standard_b64encode(bytes(value)).decode("ascii")


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
    object_codec = _object_codec(dtype)
    dt = np.dtype(object if object_codec else dtype)
    data_type = None
    if object_codec:
        name, big_endian = "", False
        fill = _variable_fill(object_codec, fill_value)
    elif _is_spelled_out(dt):
        name, big_endian = "", False
        data_type, fill = _spelled_out(dt, fill_value, int(zarr_format))
    else:
        name, big_endian = _dtype(dt)
        fill = _fill(fill_value, name)
    if chunks is None:
        within = _shape(shape, "shape") if shards is None else _shape(shards, "shards")
        # zarr-python counts one byte per variable-length element.
        chunks = guess_chunks(within, 1 if object_codec else dt.itemsize)
    spec = {
        "shape": _shape(shape, "shape"),
        "dtype": name,
        "data_type": data_type,
        "big_endian": big_endian,
        "chunks": _shape(chunks, "chunks"),
        "shards": _shape(shards, "shards"),
        "compressors": _codecs(compressors),
        "filters": _codecs(filters) if filters != "auto" else None,
        "object_codec": object_codec,
        "fill_value": fill,
        "attributes": dict(attributes or {}),
        "dimension_names": None if dimension_names is None else list(dimension_names),
        "zarr_format": int(zarr_format),
    }
    return json.dumps(spec)
