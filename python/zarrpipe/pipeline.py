"""`zarrpipe.CodecPipeline`: zarr-python's codec pipeline, decoding and encoding in Rust.

Select it with ``zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"})`` or the
``ZARR_CODEC_PIPELINE__PATH=zarrpipe.CodecPipeline`` environment variable. zarr-python plans
which chunks a selection touches; zarrpipe decodes them in parallel with the GIL released,
straight into zarr-python's output array (every selection kind: a chunk selection that is not
a box is read as a pick, as `Array` selections are). Local and object stores are read and
written by Rust directly, under the same per-key protocol as zarrpipe's own writes; for any
other store, zarr-python's store API moves the bytes. What zarrpipe cannot do (a data type or
codec it does not read, a codec class that is not zarr-python's, an output buffer it cannot
write) goes to zarr-python's own pipeline: correct results always, with a
``FallbackWarning`` saying why, or an error with
``zarr.config.set({"codec_pipeline.strict": True})``.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import zarr.abc.codec as _abc
from zarr.abc.codec import Codec
from zarr.abc.store import RangeByteRequest, SuffixByteRequest
from zarr.codecs import ShardingCodec
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.core.common import concurrent_map
from zarr.core.config import config
from zarr.core.metadata import ArrayV3Metadata

from zarrpipe._pipeline_arrays import (
    ENGINE_STORES,  # noqa: F401  (tests look at the stores the pipeline opened)
    FallbackWarning,
    array_metadata_json,
    as_counts,
    build_impl,
    codecs_of,
    local_root,
    native_dtype,
    strict_mode,
    to_dtype,
)
from zarrpipe._pipeline_selections import value_for_selection
from zarrpipe._zarrpipe import UnsupportedError, _ChunkRequests, _PickRequests, _PipelineArray

__all__ = ["CodecPipeline", "FallbackWarning"]

if TYPE_CHECKING:
    from typing import Self

    from zarr.abc.store import ByteGetter, ByteSetter, Store
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer
    from zarr.core.chunk_grids import ChunkGrid
    from zarr.core.indexing import SelectorTuple
    from zarr.core.metadata import ArrayMetadata

    BatchInfo = tuple[ByteGetter, ArraySpec, SelectorTuple, SelectorTuple, bool]

# zarr >= 3.3 expects `read` to report, per chunk, whether it was present: a `GetResult`
# (a TypedDict) each. Read-only mappings, so that every chunk can share one (a fresh dict
# per chunk was 0.9 ms of a read of 8,192 chunks; zarr-python only looks up "status").
_REPORTS_STATUS = hasattr(_abc, "GetResult")
_PRESENT = MappingProxyType({"status": "present"})
_MISSING = MappingProxyType({"status": "missing"})


@dataclass(eq=False)
class CodecPipeline(_abc.CodecPipeline):
    """zarr-python's codec pipeline, with zarrpipe's Rust engine decoding and encoding.

    You do not make one yourself: zarr-python does, for each array, once it is selected with
    `zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"})` or the environment
    variable `ZARR_CODEC_PIPELINE__PATH=zarrpipe.CodecPipeline`. zarr-python plans each read
    and write; the chunks of a batch are decoded (encoded) in parallel with the GIL released,
    straight into zarr-python's output array. Local stores and `zarr.storage.ObjectStore`
    over obstore's S3, GCS, Azure and HTTP stores are read and written by Rust; other stores
    through their own API.

    An array zarrpipe cannot handle (a data type that is not a fixed-size number or bool, a
    codec it does not know) runs on zarr-python's own pipeline, with a `FallbackWarning`.

    Args:
        metadata: The array's metadata (zarr-python's `ArrayV2Metadata` / `ArrayV3Metadata`).
        store: The zarr-python store the array lives in.

    Raises:
        zarrpipe.UnsupportedError: In strict mode (`codec_pipeline.strict`), for an array
            that would fall back.
    """

    metadata: ArrayMetadata
    store: Store
    _impl: _PipelineArray | None = field(default=None, compare=False, repr=False)
    _fallback: BatchedCodecPipeline | None = field(default=None, compare=False, repr=False)
    _warned: bool = field(default=False, compare=False, repr=False)
    # The root of a LocalStore when the engine array was built (None for other stores).
    _root: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self._fallback is None:
            self._fallback = BatchedCodecPipeline.from_codecs(codecs_of(self.metadata))

    @classmethod
    def from_array_metadata_and_store(cls, array_metadata: ArrayMetadata, store: Store) -> Self:
        impl = build_impl(array_metadata, store)
        return cls(metadata=array_metadata, store=store, _impl=impl, _root=local_root(store))

    @classmethod
    def from_codecs(cls, codecs: Iterable[Codec]) -> Any:
        # Without metadata and a store (e.g. inside a shard) zarr-python's pipeline does it.
        return BatchedCodecPipeline.from_codecs(codecs)

    def __eq__(self, other: object) -> bool:
        # By JSON, not by metadata objects: a NaN fill value must equal itself after pickling.
        if not isinstance(other, CodecPipeline):
            return NotImplemented
        mine, theirs = array_metadata_json(self.metadata), array_metadata_json(other.metadata)
        return self.store == other.store and mine == theirs

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces

    def __getstate__(self) -> dict[str, Any]:
        return {"metadata": self.metadata, "store": self.store}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._warned = False
        self.metadata = state["metadata"]
        self.store = state["store"]
        self._impl = build_impl(self.metadata, self.store)
        self._root = local_root(self.store)
        self._fallback = BatchedCodecPipeline.from_codecs(codecs_of(self.metadata))

    @property
    def _python(self) -> BatchedCodecPipeline:
        assert self._fallback is not None
        return self._fallback

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        return self

    def __iter__(self) -> Iterator[Codec]:
        return iter(codecs_of(self.metadata))

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

    @property
    def _sharded(self) -> bool:
        codecs = self.metadata.codecs if isinstance(self.metadata, ArrayV3Metadata) else ()
        return any(isinstance(c, ShardingCodec) for c in codecs)

    def _supported_buffer(self, array: Any) -> bool:
        """A buffer of exactly the engine's elements: decoded straight into."""
        dtype = native_dtype(self.metadata)
        return isinstance(array, np.ndarray) and dtype is not None and array.dtype == dtype

    def _converted_buffer(self, array: Any) -> bool:
        """A NumPy buffer of another type or byte order than the array's (zarr-python
        allocates a v2 big-endian array's buffers big-endian; `get_*_selection(out=)` takes
        any NumPy buffer): decoded into native scratch, NumPy converts each piece into
        place, as zarr-python's `out[selection] = chunk` does."""
        dtype = native_dtype(self.metadata)
        return isinstance(array, np.ndarray) and dtype is not None and array.dtype != dtype

    def _reads_store(self, batch: list[BatchInfo]) -> bool:
        """Whether the engine fetches these chunks itself: it reaches the store, and every
        chunk of the batch is in it."""
        assert self._impl is not None
        store = self.store
        # zarr-python's ByteGetter protocol has no `store`; its StorePath does.
        getters: list[Any] = [item[0] for item in batch]
        if not self._impl.reads_store or not all(g.store is store for g in getters):
            return False
        root = local_root(self.store)
        if root != self._root:
            # The store moved (`LocalStore.move`): the engine follows it to its new root.
            impl = build_impl(self.metadata, self.store)
            if impl is None or not impl.reads_store:
                return False
            self._impl, self._root = impl, root
        return True

    def _fall_back(self, why: str) -> None:
        """Strict mode raises; otherwise warns, once per array, that zarr-python's pipeline
        runs this batch."""
        if strict_mode():
            raise UnsupportedError(f"zarrpipe.CodecPipeline: {why}")
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"zarrpipe.CodecPipeline: {why}; zarr-python's pipeline reads or writes "
                "these chunks (warned once per array)",
                FallbackWarning,
                stacklevel=3,
            )

    async def read(
        self,
        batch_info: Iterable[BatchInfo],
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> Any:
        batch = list(batch_info)
        array: Any = out.as_ndarray_like()
        present: list[bool] | None = None
        if self._impl is not None and batch and self._impl.variable:
            present = await self._read_variable(batch, array)
        elif self._impl is not None and batch and self._supported_buffer(array):
            requests = None if drop_axes else _ChunkRequests.from_batch(batch, array.shape)
            if requests is not None:
                present = await self._decode_into(batch, array, requests)
            else:
                present = await self._read_picks(batch, array)
        elif self._impl is not None and batch and self._converted_buffer(array):
            target, native = as_counts(array, cast(np.dtype, native_dtype(self.metadata)))
            # Read in the stored type, then converted as a whole (another byte order).
            native_out = target.astype(native)
            present = await self._read_picks(batch, native_out)
            if present is not None:
                target[...] = native_out
        if present is None:
            if self._impl is not None and batch:
                self._fall_back("output buffer or chunk selection not supported")
            return await self._python.read(batch, out, drop_axes)
        if _REPORTS_STATUS:
            return tuple([_PRESENT if p else _MISSING for p in present])
        return None

    async def _read_variable(self, batch: list[BatchInfo], out: Any) -> list[bool] | None:
        """Strings, bytes: the engine decodes each whole stored chunk in parallel and puts
        the selected elements at their places in `out`."""
        assert self._impl is not None
        try:
            requests = _PickRequests.from_batch(batch, out.shape, True)
        except (IndexError, TypeError):
            return None  # a selection the engine does not take
        encoded = await self._fetch([(getter, spec) for getter, spec, *_ in batch])
        await asyncio.to_thread(self._impl.read_variable, out, requests, encoded)
        return [e is not None for e in encoded]

    async def _decode_into(
        self, batch: list[BatchInfo], array: Any, requests: _ChunkRequests
    ) -> list[bool]:
        """Decodes each request's chunk part into `array` in parallel; whether each chunk
        is stored (a missing one reads as the fill value)."""
        assert self._impl is not None
        if self._reads_store(batch):
            return list(await asyncio.to_thread(self._impl.read, array, requests))
        partial = self._impl.partial_shard_indexes(array, requests) if self._sharded else None
        if partial is not None and any(n is not None for n in partial[0]):
            impl = self._impl

            def ranges(some: list[int], indexes: list[bytes | None]) -> list[Any]:
                return impl.inner_ranges(array, requests.subset(some), indexes)

            fetched = await self._fetch_in_part(batch, *partial, ranges)
            return list(await asyncio.to_thread(self._impl.read_fetched, array, requests, fetched))
        encoded = await self._fetch([(getter, spec) for getter, spec, *_ in batch])
        return list(await asyncio.to_thread(self._impl.read, array, requests, encoded))

    async def _fetch_in_part(
        self,
        batch: list[BatchInfo],
        index_lens: list[int | None],
        at_end: bool,
        ranges_of: Callable[[list[int], list[bytes | None]], list[list[tuple[int, int]]]],
    ) -> list[Any]:
        """What `read_fetched` (and `read_picks`) take, from a store zarrpipe does not
        reach: a shard that a request needs only part of is fetched as its index, then the
        byte ranges of the inner chunks it needs (nearby ones merged; `ranges_of(items,
        indexes)` asks the engine), as zarr-python's sharding codec does; every other chunk
        or shard whole."""
        some = [i for i, n in enumerate(index_lens) if n is not None]
        rest = [i for i, n in enumerate(index_lens) if n is None]

        async def get(i: int, byte_range: Any) -> bytes | None:
            getter, spec = batch[i][0], batch[i][1]
            buf = await getter.get(prototype=spec.prototype, byte_range=byte_range)
            return None if buf is None else buf.to_bytes()

        def index_range(n: int) -> Any:
            return SuffixByteRequest(n) if at_end else RangeByteRequest(0, n)

        limit = config.get("async.concurrency")
        indexes, wholes = await asyncio.gather(
            concurrent_map(
                [(i, index_range(n)) for i, n in enumerate(index_lens) if n is not None], get, limit
            ),
            self._fetch([(batch[i][0], batch[i][1]) for i in rest]),
        )
        ranges = ranges_of(some, list(indexes))
        jobs = [(k, start, end) for k, rs in enumerate(ranges) for start, end in rs]

        async def piece(k: int, start: int, end: int) -> bytes | None:
            return await get(some[k], RangeByteRequest(start, end))

        pieces = await concurrent_map(jobs, piece, limit)
        fetched: list[Any] = [None] * len(batch)
        for i, whole in zip(rest, wholes, strict=True):
            fetched[i] = whole
        parts: list[list[tuple[int, bytes]]] = [[] for _ in some]
        for (k, start, _), data in zip(jobs, pieces, strict=True):
            if data is not None:  # a shard gone since its index: the engine says which
                parts[k].append((start, data))
        for k, i in enumerate(some):
            fetched[i] = None if indexes[k] is None else (indexes[k], parts[k])
        return fetched

    async def _read_picks(
        self, batch: list[BatchInfo], out: np.ndarray[Any, Any]
    ) -> list[bool] | None:
        """Integer arrays, masks, steps, coordinates (and dropped axes): each chunk
        selection becomes a pick over the chunk and each output selection one over `out`,
        both parsed in Rust (`_PickRequests`); the engine decodes each chunk's box of wanted
        elements once and gathers its values to their places in `out`. None when a chunk
        shape or selection is not one the engine takes (zarr-python's pipeline runs it)."""
        assert self._impl is not None
        if any(len(spec.shape) == 0 for _, spec, *_ in batch):
            return None
        try:
            requests = _PickRequests.from_batch(batch, out.shape, True)
        except (IndexError, TypeError):
            return None  # a chunk selection the engine does not take
        if self._reads_store(batch):
            found = await asyncio.to_thread(self._impl.read_picks, out, requests)
        else:
            found = await self._read_picks_fetched(batch, out, requests)
        return list(found)

    async def _read_picks_fetched(
        self, batch: list[BatchInfo], out: np.ndarray[Any, Any], requests: _PickRequests
    ) -> list[bool]:
        """`read_picks` from a store the engine does not reach: shards a pick needs only
        part of are fetched in part (see `_fetch_in_part`), every other value whole."""
        impl = self._impl
        assert impl is not None
        partial = impl.partial_pick_indexes(requests) if self._sharded else None
        if partial is None or all(n is None for n in partial[0]):
            encoded = await self._fetch([(getter, spec) for getter, spec, *_ in batch])
            return list(await asyncio.to_thread(impl.read_picks, out, requests, encoded))

        def ranges(some: list[int], indexes: list[bytes | None]) -> list[Any]:
            return impl.pick_inner_ranges(requests.subset(some), indexes)

        fetched = await self._fetch_in_part(batch, *partial, ranges)
        return list(await asyncio.to_thread(impl.read_picks, out, requests, None, fetched))

    # ------------------------------------------------------------------ writes

    async def write(
        self,
        batch_info: Iterable[BatchInfo],
        value: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> None:
        batch = list(batch_info)
        array = value.as_ndarray_like()
        if self._impl is None or not batch or not isinstance(array, np.ndarray):
            if self._impl is not None and batch:
                self._fall_back("value not supported for writes (not a NumPy array)")
            # zarr-python passes its ByteSetters here, typed as the read's ByteGetters.
            await self._python.write(cast(Any, batch), value, drop_axes)
            return
        if self._impl.variable:
            await self._write_picks(batch, array, drop_axes, None)
            return
        dtype = native_dtype(self.metadata)
        assert dtype is not None  # build_impl refuses arrays without one
        requests = None
        basic = None
        if not drop_axes and array.dtype.kind == dtype.kind:
            basic = value_for_selection(to_dtype(array, dtype), batch)
            if basic is not None:
                requests = _ChunkRequests.from_batch(batch, basic.shape)
        if requests is not None:
            # As zarr-python does: a chunk whose part inside the array is all written
            # ("complete") is built from the fill value, without reading it; a shard
            # always keeps the cells the write does not cover, those beyond the array's
            # shape too (zarr-python encodes shards partially), so a later resize that
            # grows the array finds them again.
            fresh = [bool(complete) and not self._sharded for *_, complete in batch]
            await self._encode_from(batch, basic, requests, fresh)
        else:
            await self._write_picks(batch, array, drop_axes, dtype)

    async def _write_picks(
        self,
        batch: list[BatchInfo],
        value: np.ndarray[Any, Any],
        drop_axes: tuple[int, ...],
        dtype: np.dtype[Any] | None,
    ) -> None:
        """Integer arrays, masks, steps, coordinates, and every write of strings or bytes:
        the selections are parsed in Rust (`_PickRequests`, the output side over the value),
        which takes each chunk's values from the value as NumPy's assignment would, then
        reads, updates and stores each chunk (one step no other writer of it interleaves
        with)."""
        assert self._impl is not None
        if dtype is not None:
            value = to_dtype(value, dtype)
        # (not `np.ascontiguousarray`, which makes a 0-d value 1-d)
        value = value if value.flags.c_contiguous else value.copy(order="C")
        requests = _PickRequests.from_batch(batch, value.shape if value.ndim else None, False)
        fresh = [complete and not self._sharded for complete in requests.complete()]
        write_empty = bool(batch[0][1].config.write_empty_chunks)
        write = self._impl.write_picks
        if self._reads_store(batch):
            self.store._check_writable()
            await asyncio.to_thread(write, value, requests, drop_axes, fresh, write_empty)
            return
        existing = await self._fetch_partial(batch, [not f for f in fresh])
        encoded = await asyncio.to_thread(
            write, value, requests, drop_axes, fresh, write_empty, existing
        )
        await self._store_all(batch, encoded)

    async def _encode_from(
        self, batch: list[BatchInfo], array: Any, requests: _ChunkRequests, fresh: list[bool]
    ) -> None:
        """Encodes each request's part of `array` into its chunk (read-modify-write unless
        `fresh`) and stores it, or deletes it when it is all fill value and the array does
        not write empty chunks."""
        assert self._impl is not None
        write_empty = bool(batch[0][1].config.write_empty_chunks)
        if self._reads_store(batch):
            self.store._check_writable()
            await asyncio.to_thread(self._impl.write, array, requests, write_empty, fresh)
            return
        partial = [
            not f and not whole for f, whole in zip(fresh, requests.covers_chunk(), strict=True)
        ]
        existing = await self._fetch_partial(batch, partial)
        encoded = await asyncio.to_thread(
            self._impl.write, array, requests, write_empty, fresh, existing
        )
        await self._store_all(batch, encoded)

    async def _store_all(self, batch: list[BatchInfo], encoded: list[bytes | None]) -> None:
        """Stores each item's encoded chunk through zarr-python's store (None: deletes it)."""

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

    async def _fetch(self, getters: list[tuple[ByteGetter, ArraySpec]]) -> list[bytes | None]:
        async def get(getter: ByteGetter, spec: ArraySpec) -> bytes | None:
            buf = await getter.get(prototype=spec.prototype)
            return None if buf is None else buf.to_bytes()

        return await concurrent_map(getters, get, config.get("async.concurrency"))

    async def _fetch_partial(
        self, batch: list[BatchInfo], partial: list[bool]
    ) -> list[bytes | None]:
        wanted = [(getter, spec) for (getter, spec, *_), p in zip(batch, partial, strict=True) if p]
        fetched = iter(await self._fetch(wanted)) if wanted else iter(())
        return [next(fetched) if p else None for p in partial]


# zarr-python finds pipelines by module + name: "zarrpipe.CodecPipeline".
CodecPipeline.__module__ = "zarrpipe"
