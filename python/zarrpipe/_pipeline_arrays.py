"""Which arrays `zarrpipe.CodecPipeline` hands to the engine, and over which store: the
fallback policy (a warning, or an error in strict mode), the engine array built from
zarr-python's metadata, and zarrpipe's own store over the location of zarr-python's store
when Rust can read it itself."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from zarr.abc.codec import Codec
from zarr.core.config import config
from zarr.core.metadata import ArrayV2Metadata, ArrayV3Metadata
from zarr.storage import LocalStore

from zarrpipe._zarrpipe import Store as _EngineStore
from zarrpipe._zarrpipe import UnsupportedError, ZarrpipeError, _obstore_location, _PipelineArray

if TYPE_CHECKING:
    from zarr.core.metadata import ArrayMetadata


class FallbackWarning(UserWarning):
    """zarrpipe handed an array to zarr-python's own codec pipeline; the message says why.

    Issued once per array. `zarr.config.set({"codec_pipeline.strict": True})` raises
    `zarrpipe.UnsupportedError` instead.
    """


def strict_mode() -> bool:
    return bool(config.get("codec_pipeline.strict", False))


def codecs_of(metadata: ArrayMetadata) -> list[Codec]:
    if isinstance(metadata, ArrayV3Metadata):
        return list(metadata.codecs)
    from zarr.codecs._v2 import V2Codec

    assert isinstance(metadata, ArrayV2Metadata)
    return [V2Codec(filters=metadata.filters, compressor=metadata.compressor)]


def native_dtype(metadata: ArrayMetadata) -> np.dtype[Any] | None:
    """The NumPy dtype of the engine's elements for a fixed-size type (numbers, bool,
    datetimes, fixed-length strings and bytes, records): native byte order (the engine
    swaps); a v2 record's fields as stored (v2 records carry their byte order, v3 ones take
    the bytes codec's); None for other types (variable-length ones go elsewhere)."""
    dtype = metadata.dtype.to_native_dtype() if hasattr(metadata.dtype, "to_native_dtype") else None
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biufcMmUSV" or dtype.hasobject:
        return None
    if dtype.names is not None and isinstance(metadata, ArrayV2Metadata):
        return dtype
    # newbyteorder reaches into every field of a record.
    return dtype.newbyteorder("=")


def _is_variable(metadata: ArrayMetadata) -> bool:
    """Variable-length strings or bytes (zarr-python's vlen-utf8 / vlen-bytes types): the
    engine decodes and encodes their whole chunks, NumPy places them."""
    return getattr(metadata.dtype, "object_codec_id", None) in ("vlen-utf8", "vlen-bytes")


def _custom_codec(codecs: Iterable[Any]) -> Any:
    """The first codec whose class is not zarr-python's own (e.g. registered through
    `zarr.config` "codecs.<name>"): its behaviour may differ, so zarr-python must run it."""
    for codec in codecs:
        if not type(codec).__module__.startswith("zarr."):
            return codec
        inner = _custom_codec([*getattr(codec, "codecs", ()), *getattr(codec, "index_codecs", ())])
        if inner is not None:
            return inner
    return None


def as_counts(array: np.ndarray, dtype: np.dtype[Any]) -> tuple[np.ndarray, np.dtype[Any]]:
    """`array` and `dtype` with every time (field) as int64 counts when they are the same
    type in different byte orders and hold a time, since NumPy copies a generic-unit time
    between byte orders unswapped (and swaps integers, record fields too); otherwise as
    they are."""
    if (
        array.dtype != dtype
        and array.dtype.newbyteorder("=") == dtype.newbyteorder("=")
        and _counts_dtype(dtype) != dtype
    ):
        return array.view(_counts_dtype(array.dtype)), _counts_dtype(dtype)
    return array, dtype


def _counts_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """`dtype` with each time, in records and sub-arrays too, as an int64 of its byte
    order: the same layout, bytes read as counts."""
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return np.dtype((_counts_dtype(base), shape))
    if dtype.names is not None:
        fields = [dtype.fields[n] for n in dtype.names]  # type: ignore[index]  # names: fields too
        return np.dtype(
            {
                "names": list(dtype.names),
                "formats": [_counts_dtype(f[0]) for f in fields],
                "offsets": [f[1] for f in fields],
                "itemsize": dtype.itemsize,
            }
        )
    if dtype.kind in "Mm":
        return np.dtype(("" if dtype.byteorder in "=|" else dtype.byteorder) + "i8")
    return dtype


def to_dtype(values: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """`values.astype(dtype, copy=False)`, times converted through their counts."""
    counts, as_int = as_counts(values, dtype)
    if counts is values:
        return values.astype(dtype, copy=False)
    return counts.astype(as_int, copy=False).view(dtype)


def build_impl(metadata: ArrayMetadata, store: Any) -> _PipelineArray | None:
    """The engine array for `metadata`, reading and writing `store` itself when it can
    reach it, or None (with a warning) when zarrpipe cannot handle this array."""
    custom = _custom_codec(metadata.codecs) if isinstance(metadata, ArrayV3Metadata) else None
    if custom is not None:
        # The user configured their own codec class: honour it (and say so).
        cls = type(custom)
        reason = f"codec class {cls.__module__}.{cls.__qualname__} is not zarr-python's own"
    elif native_dtype(metadata) is None and not _is_variable(metadata):
        reason = f"data type {metadata.dtype} is not one zarrpipe reads"
    else:
        try:
            return _PipelineArray(
                array_metadata_json(metadata), _subchunk_write_order(metadata), _engine_store(store)
            )
        except UnsupportedError as e:
            reason = str(e)
        except Exception as e:  # metadata zarrs' parser rejects
            reason = f"{type(e).__name__}: {e}"
    if strict_mode():
        raise UnsupportedError(f"zarrpipe.CodecPipeline cannot handle this array: {reason}")
    warnings.warn(
        f"zarrpipe.CodecPipeline: {reason}; using zarr-python's pipeline for this array",
        FallbackWarning,
        stacklevel=4,
    )
    return None


# zarrpipe Stores over the locations zarr-python's stores point at, by process (a forked
# child opens its own: HTTP connections do not survive a fork), URL and options.
ENGINE_STORES: dict[tuple[int, str, tuple[tuple[str, str], ...]], Any] = {}


def _engine_store(store: Any) -> Any | None:
    """A zarrpipe Store over the same location as zarr-python's `store`, recognised once:
    exactly `LocalStore` (a subclass or wrapper may change what reads and writes do), an
    `FsspecStore` over fsspec's local filesystem (what `da.from_zarr("path")` and
    `xr.open_zarr("path")` open), or zarr-python's `ObjectStore` over an obstore store
    zarrpipe can open (S3, GCS, Azure, HTTP, local: the binding reads its configuration).
    None for any other store: zarr-python moves the bytes."""
    root = local_root(store)
    if root is not None:
        url, options = root, cast(dict[str, str], {})
    elif type(store).__name__ == "ObjectStore" and type(store).__module__.startswith("zarr."):
        try:
            url, options = _obstore_location(getattr(store, "store", None))
        except (TypeError, ValueError):
            return None  # a store kind or configuration we cannot carry over
    else:
        return None
    key = (os.getpid(), url, tuple(sorted(options.items())))
    found = ENGINE_STORES.get(key)
    if found is None:
        try:
            found = ENGINE_STORES.setdefault(key, _EngineStore(url, mode="a", options=options))
        except (ValueError, OSError, ZarrpipeError):
            return None
    return found


def local_root(store: Any) -> str | None:
    """The directory of a local store: `LocalStore`, or `FsspecStore` over exactly fsspec's
    `LocalFileSystem` (zarr-python wraps it for async use)."""
    if type(store) is LocalStore:
        return str(store.root)
    if type(store).__name__ != "FsspecStore" or not type(store).__module__.startswith("zarr."):
        return None
    fs = getattr(store, "fs", None)
    fs = getattr(fs, "sync_fs", fs)  # fsspec's AsyncFileSystemWrapper
    local = type(fs).__name__ == "LocalFileSystem" and type(fs).__module__ == (
        "fsspec.implementations.local"
    )
    path = getattr(store, "path", None)
    return os.path.abspath(path) if local and isinstance(path, str) else None


def _subchunk_write_order(metadata: ArrayMetadata) -> str | None:
    """zarr-python >= 3.4 lays a shard's inner chunks out in its sharding codec's
    `subchunk_write_order` (Morton by default); the engine lays out each shard so (for
    every shard shape of a rectilinear grid too). None: C order (zarr-python before 3.4,
    or an array whose codecs are not one sharding codec)."""
    codecs = list(metadata.codecs) if isinstance(metadata, ArrayV3Metadata) else []
    if len(codecs) != 1:
        return None
    order = getattr(codecs[0], "subchunk_write_order", None)
    return order if isinstance(order, str) else None


def array_metadata_json(metadata: ArrayMetadata) -> str:
    with warnings.catch_warnings():
        # zarr-python warns, on every serialisation, that some v3 data types (fixed-length
        # strings, datetimes, records) have no spec yet; it warned when the array was made.
        warnings.simplefilter("ignore")
        document = metadata.to_dict()
    # The engine needs no attributes, and zarr-python keeps some that are not JSON (an
    # object(), a lone surrogate that Rust's JSON parser refuses).
    document.pop("attributes", None)
    return json.dumps(document, sort_keys=True, default=_json_scalar)


def _json_scalar(value: Any) -> Any:
    """NumPy scalars in metadata (a codec configured with `np.int64(3)`): zarr-python writes
    them as the Python numbers they hold."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The public path of the warning (zarr-python's and users' warning filters name it).
FallbackWarning.__module__ = "zarrpipe.pipeline"
