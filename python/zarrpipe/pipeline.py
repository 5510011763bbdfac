"""`zarrpipe.CodecPipeline`: zarr-python's codec pipeline, decoding and encoding in Rust.

Select it with ``zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"})`` or the
``ZARR_CODEC_PIPELINE__PATH=zarrpipe.CodecPipeline`` environment variable. zarr-python plans
which chunks a selection touches; zarrpipe decodes them in parallel with the GIL released,
straight into zarr-python's output array. Local stores are read (and written, atomically) by
Rust directly; for any other store, zarr-python's store API fetches the bytes. Whatever
zarrpipe cannot do (a dtype, a codec, a fancy selection) goes to zarr-python's own pipeline:
correct results always, with a ``FallbackWarning`` saying why, or an error with
``zarr.config.set({"codec_pipeline.strict": True})``.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import zarr.abc.codec as _abc
from zarr.abc.codec import Codec
from zarr.codecs import ShardingCodec
from zarr.core.codec_pipeline import BatchedCodecPipeline, fill_value_or_default
from zarr.core.common import concurrent_map
from zarr.core.config import config
from zarr.core.metadata import ArrayV2Metadata, ArrayV3Metadata
from zarr.storage import LocalStore

from zarrpipe import _obstore, _plan
from zarrpipe._zarrpipe import Store, UnsupportedError, ZarrpipeError, _ChunkCodecs

if TYPE_CHECKING:
    from typing import Self

    from zarr.abc.store import ByteGetter, ByteSetter, Store
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer
    from zarr.core.chunk_grids import ChunkGrid
    from zarr.core.indexing import SelectorTuple
    from zarr.core.metadata import ArrayMetadata

    BatchInfo = tuple[ByteGetter, ArraySpec, SelectorTuple, SelectorTuple, bool]

# zarr >= 3.3 expects `read` to report, per chunk, whether it was present.
_REPORTS_STATUS = hasattr(_abc, "GetResult")


class FallbackWarning(UserWarning):
    """zarrpipe handed an array to zarr-python's own codec pipeline (the warning says why)."""


def _strict() -> bool:
    return bool(config.get("codec_pipeline.strict", False))


def _codecs_of(metadata: ArrayMetadata) -> list[Codec]:
    if isinstance(metadata, ArrayV3Metadata):
        return list(metadata.codecs)
    from zarr.codecs._v2 import V2Codec

    assert isinstance(metadata, ArrayV2Metadata)
    return [V2Codec(filters=metadata.filters, compressor=metadata.compressor)]


def _native_dtype(metadata: ArrayMetadata) -> np.dtype[Any] | None:
    dtype = metadata.dtype.to_native_dtype() if hasattr(metadata.dtype, "to_native_dtype") else None
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biufc" or not dtype.isnative:
        return None
    return dtype


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


def _build_impl(metadata: ArrayMetadata) -> _ChunkCodecs | None:
    """The Rust codecs for `metadata`, or None (with a warning) when zarrpipe cannot do it."""
    if isinstance(metadata, ArrayV3Metadata) and _custom_codec(metadata.codecs) is not None:
        # The user configured their own codec class: honour it, quietly.
        return None
    if _native_dtype(metadata) is None:
        reason = f"data type {metadata.dtype} is not a native-endian fixed-size number or bool"
    else:
        try:
            return _ChunkCodecs(_metadata_json(metadata), _subchunk_order(metadata))
        except UnsupportedError as e:
            reason = str(e)
        except Exception as e:  # metadata zarrs' parser rejects
            reason = f"{type(e).__name__}: {e}"
    if _strict():
        raise UnsupportedError(f"zarrpipe.CodecPipeline cannot handle this array: {reason}")
    warnings.warn(
        f"zarrpipe.CodecPipeline: {reason}; using zarr-python's pipeline for this array",
        FallbackWarning,
        stacklevel=4,
    )
    return None


def _local_root(getter: Any) -> str | None:
    # Exactly LocalStore: a subclass or a wrapper may change what reads and writes do.
    store = getattr(getter, "store", None)
    if type(store) is LocalStore and isinstance(getattr(getter, "path", None), str):
        return str(store.root)
    return None


# zarrpipe Stores over the object stores that zarr-python's ObjectStore wraps, by process
# (a forked child opens its own: HTTP connections do not survive a fork), URL and options.
_REMOTE_STORES: dict[tuple[int, str, tuple[tuple[str, str], ...]], Any] = {}


def _remote_store(getter: Any) -> Any | None:
    """A zarrpipe Store that reads what `getter`'s store holds, when that store is
    zarr-python's ObjectStore over an obstore store zarrpipe can open (S3, GCS, Azure, HTTP,
    local; see `_obstore`): Rust then fetches the chunks
    itself, concurrently (byte ranges of shards), and decodes them as they arrive."""
    store = getattr(getter, "store", None)
    if type(store).__name__ != "ObjectStore" or not type(store).__module__.startswith("zarr."):
        return None
    if not isinstance(getattr(getter, "path", None), str):
        return None
    try:
        url, options = _obstore.url_and_options(getattr(store, "store", None))
    except (TypeError, ValueError):
        return None  # a store kind or configuration we cannot carry over: zarr-python fetches
    key = (os.getpid(), url, tuple(sorted(options.items())))
    found = _REMOTE_STORES.get(key)
    if found is None:
        try:
            found = _REMOTE_STORES.setdefault(key, Store(url, options=options))
        except (ValueError, OSError, ZarrpipeError):
            return None
    return found


def _subchunk_order(metadata: ArrayMetadata) -> list[int] | None:
    """zarr-python >= 3.4 lays a shard's inner chunks out in `subchunk_write_order` (Morton
    by default); the C-order indices of that order, so zarrpipe's shards match."""
    codecs = list(metadata.codecs) if isinstance(metadata, ArrayV3Metadata) else []
    if len(codecs) != 1 or getattr(codecs[0], "subchunk_write_order", None) in (
        None,
        "lexicographic",
        "unordered",
    ):
        return None
    codec = codecs[0]
    shard = metadata.chunk_grid.chunk_shape  # type: ignore[attr-defined]
    per_shard = tuple(s // c for s, c in zip(shard, codec.chunk_shape, strict=True))
    coords = list(codec._subchunk_order_iter(per_shard, codec.subchunk_write_order))
    return [int(i) for i in np.ravel_multi_index(tuple(np.array(coords).T), per_shard)]


def _metadata_json(metadata: ArrayMetadata) -> str:
    return json.dumps(metadata.to_dict(), sort_keys=True)


@dataclass(eq=False)
class CodecPipeline(_abc.CodecPipeline):
    """zarr-python's codec pipeline with zarrpipe's Rust engine doing the decoding."""

    metadata: ArrayMetadata
    store: Store
    _impl: _ChunkCodecs | None = field(default=None, compare=False, repr=False)
    _fallback: BatchedCodecPipeline | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self._fallback is None:
            self._fallback = BatchedCodecPipeline.from_codecs(_codecs_of(self.metadata))

    @classmethod
    def from_array_metadata_and_store(cls, array_metadata: ArrayMetadata, store: Store) -> Self:
        return cls(metadata=array_metadata, store=store, _impl=_build_impl(array_metadata))

    @classmethod
    def from_codecs(cls, codecs: Iterable[Codec]) -> Any:
        # Without metadata and a store (e.g. inside a shard) zarr-python's pipeline does it.
        return BatchedCodecPipeline.from_codecs(codecs)

    def __eq__(self, other: object) -> bool:
        # By JSON, not by metadata objects: a NaN fill value must equal itself after pickling.
        if not isinstance(other, CodecPipeline):
            return NotImplemented
        return self.store == other.store and _metadata_json(self.metadata) == _metadata_json(
            other.metadata
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces

    def __getstate__(self) -> dict[str, Any]:
        return {"metadata": self.metadata, "store": self.store}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.metadata = state["metadata"]
        self.store = state["store"]
        self._impl = _build_impl(self.metadata)
        self._fallback = BatchedCodecPipeline.from_codecs(_codecs_of(self.metadata))

    @property
    def _python(self) -> BatchedCodecPipeline:
        assert self._fallback is not None
        return self._fallback

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        return self

    def __iter__(self) -> Iterator[Codec]:
        return iter(_codecs_of(self.metadata))

    @property
    def supports_partial_decode(self) -> bool:
        return self._python.supports_partial_decode

    @property
    def supports_partial_encode(self) -> bool:
        return self._python.supports_partial_encode

    def validate(self, *, shape: tuple[int, ...], dtype: Any, chunk_grid: ChunkGrid) -> None:
        self._python.validate(shape=shape, dtype=dtype, chunk_grid=chunk_grid)

    def compute_encoded_size(self, byte_length: int, array_spec: ArraySpec) -> int:
        return self._python.compute_encoded_size(byte_length, array_spec)

    async def decode(
        self, chunk_bytes_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> Iterable[NDBuffer | None]:
        return await self._python.decode(chunk_bytes_and_specs)

    async def encode(
        self, chunk_arrays_and_specs: Iterable[tuple[NDBuffer | None, ArraySpec]]
    ) -> Iterable[Buffer | None]:
        return await self._python.encode(chunk_arrays_and_specs)

    # ------------------------------------------------------------------ reads

    def _plan(
        self, batch: list[BatchInfo], array: np.ndarray[Any, Any]
    ) -> list[tuple[str, list[int], list[tuple[int, int]], int, list[int]]] | None:
        items = []
        for getter, spec, chunk_sel, out_sel, _ in batch:
            placed = _plan.placement(
                tuple(spec.shape), chunk_sel, out_sel, array.shape, array.strides
            )
            if placed is None:
                return None
            want, offset, strides = placed
            items.append(
                (str(getattr(getter, "path", "")), list(spec.shape), want, offset, strides)
            )
        return items

    @property
    def _sharded(self) -> bool:
        codecs = self.metadata.codecs if isinstance(self.metadata, ArrayV3Metadata) else ()
        return any(isinstance(c, ShardingCodec) for c in codecs)

    def _supported_buffer(self, array: Any) -> bool:
        dtype = _native_dtype(self.metadata)
        return (
            isinstance(array, np.ndarray)
            and dtype is not None
            and array.dtype == dtype
            and array.dtype.isnative
        )

    def _fallback_or_raise(self, why: str) -> None:
        if _strict():
            raise UnsupportedError(f"zarrpipe.CodecPipeline: {why}")

    async def read(
        self,
        batch_info: Iterable[BatchInfo],
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> Any:
        batch = list(batch_info)
        array = out.as_ndarray_like()
        items = None
        if self._impl is not None and batch and not drop_axes and self._supported_buffer(array):
            items = self._plan(batch, array)
        if items is None:
            if self._impl is not None and batch:
                self._fallback_or_raise("selection or output buffer not supported")
            return await self._python.read(batch, out, drop_axes)
        fill = np.asarray(fill_value_or_default(batch[0][1]), dtype=array.dtype).tobytes()
        roots = {_local_root(getter) for getter, *_ in batch}
        remote = _remote_store(batch[0][0]) if None in roots else None
        if len(roots) == 1 and None not in roots:
            present = await asyncio.to_thread(
                self._impl.read, array, items, fill, None, roots.pop()
            )
        elif remote is not None and all(g.store is batch[0][0].store for g, *_ in batch):
            present = await asyncio.to_thread(
                self._impl.read, array, items, fill, None, None, remote
            )
        else:
            encoded = await self._fetch([(getter, spec) for getter, spec, *_ in batch])
            present = await asyncio.to_thread(self._impl.read, array, items, fill, encoded)
        if _REPORTS_STATUS:
            return tuple(
                _abc.GetResult(status="present" if p else "missing")  # type: ignore[attr-defined]
                for p in present
            )
        return None

    async def _fetch(self, getters: list[tuple[ByteGetter, ArraySpec]]) -> list[bytes | None]:
        async def get(getter: ByteGetter, spec: ArraySpec) -> bytes | None:
            buf = await getter.get(prototype=spec.prototype)
            return None if buf is None else buf.to_bytes()

        return await concurrent_map(getters, get, config.get("async.concurrency"))

    # ------------------------------------------------------------------ writes

    async def write(
        self,
        batch_info: Iterable[BatchInfo],
        value: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> None:
        batch = list(batch_info)
        array = value.as_ndarray_like()
        items = None
        if self._impl is not None and batch and not drop_axes and isinstance(array, np.ndarray):
            dtype = _native_dtype(self.metadata)
            if dtype is not None and array.dtype.kind == dtype.kind:
                if array.dtype != dtype:
                    array = array.astype(dtype)
                items = self._plan_write(batch, array)
        if items is None:
            if self._impl is not None and batch:
                self._fallback_or_raise("selection or value not supported for writes")
            await self._python.write(batch, value, drop_axes)
            return
        spec = batch[0][1]
        fill = np.asarray(fill_value_or_default(spec), dtype=array.dtype).tobytes()
        write_empty = bool(spec.config.write_empty_chunks)
        # As zarr-python does: a chunk whose part inside the array is all written ("complete")
        # is built from the fill value, without reading it; a shard always keeps the cells
        # the write does not cover, those beyond the array's shape too (zarr-python encodes
        # shards partially), so a later resize that grows the array finds them again.
        fresh = [bool(complete) and not self._sharded for *_, complete in batch]
        roots = {_local_root(setter) for setter, *_ in batch}
        if len(roots) == 1 and None not in roots:
            self.store._check_writable()
            await asyncio.to_thread(
                self._impl.write, array, items, fill, write_empty, None, roots.pop(), fresh
            )
            return
        partial = [
            not f and want != [(0, n) for n in shape]
            for f, (_, shape, want, _, _) in zip(fresh, items, strict=True)
        ]
        existing = await self._fetch_partial(batch, partial)
        encoded = await asyncio.to_thread(
            self._impl.write, array, items, fill, write_empty, existing, None, fresh
        )

        async def store_one(setter: ByteSetter, spec: ArraySpec, data: bytes | None) -> None:
            if data is None:
                await setter.delete()
            else:
                await setter.set(spec.prototype.buffer.from_bytes(data))

        await concurrent_map(
            [(setter, spec, data) for (setter, spec, *_), data in zip(batch, encoded, strict=True)],
            store_one,
            config.get("async.concurrency"),
        )

    def _plan_write(
        self, batch: list[BatchInfo], array: np.ndarray[Any, Any]
    ) -> list[tuple[str, list[int], list[tuple[int, int]], int, list[int]]] | None:
        if array.ndim == 0:  # one value broadcast over every selected element
            items = []
            for setter, spec, chunk_sel, _, _ in batch:
                want = _plan.wanted(tuple(spec.shape), chunk_sel)
                if want is None:
                    return None
                key = str(getattr(setter, "path", ""))
                items.append((key, list(spec.shape), want, 0, [0] * len(want)))
            return items
        return self._plan(batch, array)

    async def _fetch_partial(
        self, batch: list[BatchInfo], partial: list[bool]
    ) -> list[bytes | None]:
        wanted = [(getter, spec) for (getter, spec, *_), p in zip(batch, partial, strict=True) if p]
        fetched = iter(await self._fetch(wanted)) if wanted else iter(())
        return [next(fetched) if p else None for p in partial]


# zarr-python finds pipelines by module + name: "zarrpipe.CodecPipeline".
CodecPipeline.__module__ = "zarrpipe"
